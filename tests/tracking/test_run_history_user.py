"""Finding and comparing many runs, as a practitioner with a history of them does: the runs
table, the listing API, the report and comparison pages, and the loggers read back with
their own tools, after resumes, failures and changed settings."""

from __future__ import annotations

import html
import json
import re
import types
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import StepBasedEvaluationCallback, TrainerCallback
from scramjet.cli import main
from scramjet.tracking import Experiment, list_runs, read_metrics


def _run(root: Path, hyperparams: Any, project: str = "proj", epochs: int = 1) -> Path:
    exp = Experiment(project, "run", root=root, hyperparams=hyperparams, checkpoint=None)
    make_trainer([exp]).train(tiny_data(32), epochs, per_device_batch_size=16)
    return exp.run_dir


def _table(out: str) -> list[list[str]]:
    """The runs table's cells (columns are two or more spaces apart)."""
    return [re.split(r"\s{2,}", line.strip()) for line in out.strip().splitlines()]


def test_runs_table_shows_hyperparameters_exactly_not_rounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """EMA decays 0.99995 and 0.99999 are different runs; rounded to four digits both read
    ``1`` and the column that tells them apart was not even shown."""
    for decay, lr in ((0.99995, 3e-4), (0.99999, 12345.6)):
        _run(tmp_path, {"ema_decay": decay, "lr": lr})
    capsys.readouterr()
    assert main(["runs", str(tmp_path)]) == 0
    table = _table(capsys.readouterr().out)
    header = table[0]
    assert "ema_decay" in header, "the decays differ: their column is shown"
    assert [line[header.index("ema_decay")] for line in table[1:]] == ["0.99995", "0.99999"]
    assert [line[header.index("lr")] for line in table[1:]] == ["0.0003", "12345.6"]


class _Optim(NamedTuple):
    lr: float
    weight_decay: float


def test_settings_objects_of_every_common_kind_keep_their_field_names(tmp_path: Path) -> None:
    """A NamedTuple was recorded as a bare list (its names lost), a SimpleNamespace, a
    pydantic model or an attrs class as one string, and each of them refused as the whole
    hyperparams: none of their values could be compared by name."""
    import attrs
    import pydantic

    class Model(pydantic.BaseModel):
        width: int = 16
        dropout: float = 0.1

    @attrs.define
    class Data:
        batch: int = 32
        augment: bool = True

    given = {
        "optim": _Optim(lr=0.1, weight_decay=0.01),
        "model": Model(),
        "data": Data(),
        "sched": types.SimpleNamespace(warmup=100),
    }
    _run(tmp_path, given)
    found = list_runs(tmp_path)[0]["hyperparams"]
    assert found == {
        "optim.lr": 0.1,
        "optim.weight_decay": 0.01,
        "model.width": 16,
        "model.dropout": 0.1,
        "data.batch": 32,
        "data.augment": True,
        "sched.warmup": 100,
    }
    for whole, expected in (
        (types.SimpleNamespace(lr=0.3, seed=2), {"lr": 0.3, "seed": 2}),
        (Model(width=8), {"width": 8, "dropout": 0.1}),
        (Data(batch=8), {"batch": 8, "augment": True}),
        (_Optim(0.2, 0.0), {"lr": 0.2, "weight_decay": 0.0}),
    ):
        assert Experiment("p", "e", root=tmp_path, hyperparams=whole).hyperparams == expected


def _cells(page: str, section: str) -> list[list[str]]:
    """The rows of the table that follows ``<h2>section</h2>``, as text cells."""
    body = page.split(f"<h2>{section}</h2>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body)
    return [[html.unescape(c) for c in re.findall(r"<t[dh]>(.*?)</t[dh]>", r)] for r in rows]


def test_a_run_without_hyperparams_adds_no_empty_hyperparams_setting(tmp_path: Path) -> None:
    """A run declared without hyperparams listed ``hyperparams = {}`` among its other
    settings, and the comparison page called it a difference from the runs that have some."""
    plain = _run(tmp_path, None)
    tuned = _run(tmp_path, {"lr": 0.2})
    assert main(["report", str(plain), str(tuned), "-o", str(tmp_path / "cmp.html")]) == 0
    names = [
        row[0] for row in _cells((tmp_path / "cmp.html").read_text(), "Hyperparameters that differ")
    ]
    assert names[1:] == ["hyperparams.lr"], names
    page = (plain / "report.html").read_text()
    assert "<td>hyperparams</td>" not in page


def test_mid_epoch_evaluations_are_plotted_at_their_steps_not_stacked_on_the_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an evaluation every 4 steps of 6-step epochs, the loss plot drew both
    evaluations of an epoch at the same x: a vertical jump instead of a curve. The curves
    now run against the step the values were recorded at."""
    from scramjet.tracking import report

    drawn: list[tuple[str, list[tuple[str, list[int], list[float]]], str]] = []
    real = report._plot_lines

    def spy(title: str, lines: Any, xlabel: str, *rest: Any, **kw: Any) -> bytes:
        drawn.append((title, [(n, list(xs), list(ys)) for n, xs, ys in lines], xlabel))
        return real(title, lines, xlabel, *rest, **kw)

    monkeypatch.setattr(report, "_plot_lines", spy)
    runs = []
    for seed in (0, 1):
        exp = Experiment("proj", "mid", root=tmp_path, checkpoint=None)
        trainer = make_trainer([exp, StepBasedEvaluationCallback(4)], seed=seed)
        trainer.train(tiny_data(), 2, eval_dataset=tiny_data(32, 1), per_device_batch_size=16)
        runs.append(exp.run_dir)
    assert main(["report", *map(str, runs), "-o", str(tmp_path / "cmp.html")]) == 0
    loss_plots = [d for d in drawn if any(n == "eval_loss_epoch" for n, _, _ in d[1])]
    assert loss_plots, "the eval loss is plotted"
    for title, lines, xlabel in loss_plots:
        for name, xs, _ in lines:
            assert len(set(xs)) == len(xs), f"{title}: {name} has two points at one x: {xs}"
            assert xlabel == "step" and xs == sorted(xs), (title, xlabel, xs)


def test_a_resume_that_changes_a_setting_says_mlflow_keeps_the_first_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming to train longer (2 epochs, then 3) left MLflow's param at 2 without a word,
    while hyperparams.json and W&B said 3. MLflow cannot change a param: the new value is
    now a tag and a warning says which params differ."""
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    first = Experiment("proj", "longer", root=tmp_path / "runs", loggers=("csv", "mlflow"))
    make_trainer([first]).train(tiny_data(32), 2, per_device_batch_size=16)
    again = Experiment(
        "proj", "longer", root=tmp_path / "runs", loggers=("csv", "mlflow"), resume="latest"
    )
    with pytest.warns(UserWarning, match=r"num_epochs 2 -> 3") as caught:
        make_trainer([again]).train(tiny_data(32), 3, per_device_batch_size=16)
    assert again.run_dir == first.run_dir
    assert "resumed.<name>" in str(caught[0].message)
    info = json.loads((again.run_dir / "run.json").read_text())
    run = MlflowClient(tracking_uri=store.as_uri()).get_run(info["mlflow_run_id"])
    assert run.data.params["num_epochs"] == "2"
    assert run.data.tags["resumed.num_epochs"] == "3"
    assert "logger_errors" not in info


def test_nested_result_numbers_are_listed_under_the_names_the_loggers_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``log_results("test", {"per_class": {"cat": 0.5}})`` reaches TensorBoard and MLflow
    as ``test/per_class/cat``; list_runs and ``scramjet runs --metrics`` did not know it."""
    exp = Experiment("proj", "res", root=tmp_path, checkpoint=None)
    make_trainer([exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    exp.log_results("test", {"accuracy": 0.75, "per_class": {"cat": 0.5, "dog": 1.0}})
    metrics = list_runs(tmp_path)[0]["metrics"]
    assert metrics["test/accuracy"] == 0.75
    assert metrics["test/per_class/cat"] == 0.5 and metrics["test/per_class/dog"] == 1.0
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--metrics", "test/per_class/cat,per_class/dog"]) == 0
    captured = capsys.readouterr()
    table = _table(captured.out)
    assert table[1][-2:] == ["0.5", "1"], captured.out
    assert "no run has" not in captured.err, captured.err


def test_an_evaluation_within_an_epoch_loses_no_step_row_in_wandb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evaluating every 4 steps of 6-step epochs: the evaluation at step 4 reached the
    loggers before the rows of steps 1-3 (at step 8: before step 7), and W&B dropped those
    steps from the run."""
    from wandb_records import read_finished_wandb_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    exp = Experiment("proj", "mid", root=tmp_path, loggers=("csv", "wandb"), checkpoint=None)
    trainer = make_trainer([exp, StepBasedEvaluationCallback(4)])
    trainer.train(tiny_data(), 2, eval_dataset=tiny_data(32, 1), per_device_batch_size=16)
    rows = read_metrics(exp.run_dir)
    logged = {r["_step"] for r in read_finished_wandb_run(exp.run_dir)["history"]}
    assert sorted(logged) == sorted({r["step"] for r in rows}), "W&B has every step"
    order = [r["step"] for r in rows]
    assert order == sorted(order), f"rows reach the loggers out of step order: {order}"


class _Fails(TrainerCallback):
    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == 3:
            raise ValueError("loss is nan")


def test_the_report_of_a_failed_run_gives_its_end_time_not_a_finish_time(
    tmp_path: Path,
) -> None:
    """A failed run's report said ``status: failed`` and, two rows below, ``finished:
    <time>``: the row is the time the run ended, however it ended."""
    exp = Experiment("proj", "broken", root=tmp_path, checkpoint=None)
    with pytest.raises(Exception, match="loss is nan"):
        make_trainer([exp, _Fails()]).train(tiny_data(32), 3, per_device_batch_size=16)
    page = (exp.run_dir / "report.html").read_text()
    summary = page.split('<table class="summary">', 1)[1].split("</table>", 1)[0]
    labels = re.findall(r"<th>(.*?)</th>", summary)
    assert "finished" not in labels and "ended" in labels, labels
    ended = summary.split("<th>ended</th><td>", 1)[1].split("</td>", 1)[0]
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", ended), ended


def test_a_resumed_runs_duration_leaves_out_the_time_it_waited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run interrupted, then resumed a while later, reported as its duration the whole
    time from its first start to its end, waiting included: runs could not be compared
    by how long they trained."""
    import time

    class Interrupt(TrainerCallback):
        def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
            if trainer.state.epoch == 1:  # after the first epoch's checkpoint
                raise KeyboardInterrupt

    exp = Experiment("proj", "run", root=tmp_path, checkpoint="epoch", save_script=False)
    with pytest.raises(KeyboardInterrupt):
        make_trainer([exp, Interrupt()]).train(tiny_data(32), 2, per_device_batch_size=16)
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "interrupted"
    first = info["duration"]
    time.sleep(1.5)  # the run waits to be resumed
    begun = time.time()
    again = Experiment("proj", "run", root=tmp_path, resume=exp.run_dir, save_script=False)
    make_trainer([again]).train(tiny_data(32), 2, per_device_batch_size=16)
    second = time.time() - begun
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "finished" and len(info["resumed"]) == 1
    assert first <= info["duration"] <= first + second + 0.05, info
