"""Finding and comparing runs as a user with many of them does: the loggers read back with
their own tools, hyperparameters of every kind of settings object, the listing API."""

from __future__ import annotations

import collections.abc as cabc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import StepBasedEvaluationCallback, TrainerCallback
from scramjet.tracking import Experiment, list_runs, read_metrics


def _file_store_env(monkeypatch: pytest.MonkeyPatch, uri: str) -> None:
    """``MLFLOW_TRACKING_URI`` set by the user, the file-store opt-in not set (restored
    afterwards even if the logger sets it)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "placeholder")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")


def _mlflow_run(store: Path, run_dir: Path) -> Any:
    from mlflow.tracking import MlflowClient

    run_id = json.loads((run_dir / "run.json").read_text())["mlflow_run_id"]
    return MlflowClient(tracking_uri=store.as_uri()).get_run(run_id)


@pytest.mark.parametrize("as_uri", [True, False], ids=["file-uri", "plain-path"])
def test_mlflow_tracking_uri_naming_a_file_store_records_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_uri: bool
) -> None:
    store = tmp_path / "shared-mlruns"
    _file_store_env(monkeypatch, store.as_uri() if as_uri else str(store))
    exp = Experiment("proj", "uri", root=tmp_path / "runs", loggers=("csv", "mlflow"))
    make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=32)

    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "finished" and "logger_errors" not in info
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a reader in another process
    run = _mlflow_run(store, exp.run_dir)
    assert run.info.status == "FINISHED" and run.data.metrics["train_loss_epoch"] > 0


class _OddNames(TrainerCallback):
    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("acc@1", 0.5)


def test_mlflow_keeps_every_value_when_a_name_has_characters_mlflow_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "mlruns"
    _file_store_env(monkeypatch, store.as_uri())
    exp = Experiment(
        "proj",
        "names",
        root=tmp_path / "runs",
        loggers=("csv", "mlflow"),
        hyperparams={"opt(lr)": 0.1, "width": 16},
    )
    with pytest.warns(UserWarning) as caught:
        make_trainer([exp, _OddNames()]).train(tiny_data(), 1, per_device_batch_size=32)
    said = [str(w.message) for w in caught if "MLflow refuses" in str(w.message)]
    assert len(said) == 2, "one warning per name, however often it is logged"
    assert "'opt(lr)'" in said[0] and "'opt_lr_'" in said[0]
    assert "'acc@1'" in said[1] and "'acc_1'" in said[1]

    info = json.loads((exp.run_dir / "run.json").read_text())
    assert "logger_errors" not in info, info.get("logger_errors")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    run = _mlflow_run(store, exp.run_dir)
    assert run.data.params["width"] == "16" and run.data.params["opt_lr_"] == "0.1"
    assert {"train_loss", "lr", "train_loss_epoch", "acc_1"} <= set(run.data.metrics)
    assert "acc@1" in {n for r in read_metrics(exp.run_dir) for n in r["metrics"]}


class _ListConfig(cabc.MutableSequence[Any]):
    """What OmegaConf's ListConfig is to these readers: a sequence that is not a list."""

    def __init__(self, items: list[Any]) -> None:
        self._items = list(items)

    def __getitem__(self, i: Any) -> Any:
        return self._items[i]

    def __setitem__(self, i: Any, value: Any) -> None:
        self._items[i] = value

    def __delitem__(self, i: Any) -> None:
        del self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def insert(self, index: int, value: Any) -> None:
        self._items.insert(index, value)


class _DictConfig(cabc.Mapping[str, Any]):
    """What OmegaConf's DictConfig is to these readers: a mapping that is not a dict."""

    def __init__(self, **items: Any) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def test_config_object_sequences_are_recorded_as_lists(tmp_path: Path) -> None:
    cfg = _DictConfig(
        optim=_DictConfig(lr=0.1, betas=_ListConfig([0.9, 0.99])),
        layers=_ListConfig([_DictConfig(width=64), _DictConfig(width=32)]),
    )
    exp = Experiment("proj", "cfg", root=tmp_path / "runs", hyperparams=cfg)
    make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=32)

    saved = json.loads((exp.run_dir / "hyperparams.json").read_text())["hyperparams"]
    assert saved == {
        "optim": {"lr": 0.1, "betas": [0.9, 0.99]},
        "layers": [{"width": 64}, {"width": 32}],
    }


def test_list_runs_keeps_list_hyperparameters_as_lists(tmp_path: Path) -> None:
    for widths in ([128, 64], [64]):
        exp = Experiment("proj", "mlp", root=tmp_path / "runs", hyperparams={"widths": widths})
        make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=32)

    runs = list_runs(tmp_path / "runs")
    assert [r["hyperparams"]["widths"] for r in runs] == [[128, 64], [64]]
    narrowest = min(runs, key=lambda r: max(r["hyperparams"]["widths"]))
    assert narrowest["hyperparams"]["widths"] == [64]


def test_list_runs_given_a_url_says_it_reads_local_folders() -> None:
    with pytest.raises(FileNotFoundError) as raised:
        list_runs("s3://my-bucket/experiments")
    message = str(raised.value)
    assert "s3://my-bucket/experiments" in message, "the URL as given (not 's3:/...')"
    assert "local" in message and "aws s3 sync" in message


def test_mid_epoch_evaluations_reach_metrics_csv(tmp_path: Path) -> None:
    exp = Experiment("proj", "stepeval", root=tmp_path / "runs", checkpoint=None)
    trainer = make_trainer([exp, StepBasedEvaluationCallback(2)])
    trainer.train(tiny_data(), 1, eval_dataset=tiny_data(30, 1), per_device_batch_size=16)

    evaluations = trainer.run_history.get_metric_values("eval_loss_epoch")
    written = [
        r["metrics"]["eval_loss_epoch"]
        for r in read_metrics(exp.run_dir)
        if "eval_loss_epoch" in r["metrics"]
    ]
    assert len(set(evaluations)) == 3, "evaluations after steps 2, 4 and 6"
    assert set(evaluations) <= set(written), "every evaluation is in metrics.csv"


class _Score(TrainerCallback):
    def __init__(self, value: float) -> None:
        self.value = value

    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("score", self.value)


def test_runs_table_shows_a_nan_metric_as_nan_not_as_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scramjet.cli import main

    folders = []
    for value in (float("nan"), 0.5):
        exp = Experiment("proj", "div", root=tmp_path, hyperparams={"alpha": value})
        make_trainer([exp, _Score(value)]).train(tiny_data(), 1, per_device_batch_size=32)
        folders.append(exp.run_dir)
    exp = Experiment("proj", "old", root=tmp_path)  # a run without the metric
    make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=32)

    assert main(["runs", str(tmp_path), "--metrics", "score"]) == 0
    out, err = capsys.readouterr()
    cells = [line.split()[-2:] for line in out.splitlines()[1:]]
    assert cells == [["nan", "nan"], ["0.5", "0.5"], ["-", "-"]], out
    assert "no run has" not in err

    assert main(["runs", str(folders[0]), "--metrics", "score"]) == 0
    out, err = capsys.readouterr()
    assert out.split()[-1] == "nan" and "no run has a metric named" not in err, (out, err)


def test_compare_page_lists_only_settings_whose_values_differ(tmp_path: Path) -> None:
    import html
    import re

    import torch
    from tracking_helpers import tiny_model

    from scramjet import Trainer
    from scramjet.tracking.report import compare_runs

    runs = []
    for extra, declared in (({}, {"wd": 0, "width": 16}), ({"weight_decay": 0.0}, {"wd": 0.0})):
        model = tiny_model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, **extra)  # 0 and 0.0
        exp = Experiment("proj", "wd", root=tmp_path, hyperparams=declared, checkpoint=None)
        trainer = Trainer(model, torch.nn.CrossEntropyLoss(), optimizer, callbacks=[exp], seed=0)
        trainer.train(tiny_data(), 1, per_device_batch_size=32)
        runs.append(exp.run_dir)

    page = compare_runs(runs, tmp_path / "compare.html").read_text()
    section = page.split("<h2>Hyperparameters that differ</h2>", 1)[1].split("<h2>", 1)[0]
    rows = [
        [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", section)
    ]
    assert [r for r in rows if r] == [["hyperparams.width", "16", ""]]


def test_compare_page_says_how_many_epochs_each_run_reached(tmp_path: Path) -> None:
    import re

    from scramjet.tracking.report import compare_runs

    runs = []
    for epochs in (1, 3):
        exp = Experiment("proj", "len", root=tmp_path, checkpoint=None)
        make_trainer([exp]).train(tiny_data(), epochs, per_device_batch_size=32)
        runs.append(exp.run_dir)
    page = compare_runs(runs, tmp_path / "compare.html").read_text()
    section = page.split("<h2>Runs</h2>", 1)[1].split("<h2>", 1)[0]
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", section) if "<td>epochs</td>" in r)
    assert re.findall(r"<td>(.*?)</td>", row) == ["epochs", "1", "3"]
