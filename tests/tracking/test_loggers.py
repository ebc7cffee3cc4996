from __future__ import annotations

from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment, Tracker


def _run(tmp_path: Path, loggers: tuple) -> Experiment:
    exp = Experiment(
        "proj", "log", root=tmp_path, loggers=loggers, hyperparams={"lr": 0.2}, log_every_n_steps=2
    )
    trainer = make_trainer([exp])
    trainer.train(tiny_data(), 2, eval_dataset=tiny_data(30, 1), per_device_batch_size=16)
    exp.trainer_history = trainer.run_history  # type: ignore[attr-defined]
    return exp


def test_tensorboard_events_read_back(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    exp = _run(tmp_path, ("csv", "tensorboard"))
    acc = EventAccumulator(str(exp.run_dir))  # events in the run folder: run named after it
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train_loss", "lr", "train_loss_epoch", "eval_loss_epoch", "epoch"} <= tags
    steps = [e.step for e in acc.Scalars("train_loss")]
    assert steps == list(range(1, 13))
    evals = [e.value for e in acc.Scalars("eval_loss_epoch")]
    assert evals == pytest.approx(
        exp.trainer_history.get_metric_values("eval_loss_epoch"), rel=1e-6
    )
    assert "_hparams_/session_start_info" in acc.PluginTagToContent("hparams")


def test_mlflow_run_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)  # the default store is ./mlruns
    exp = _run(tmp_path, ("mlflow",))
    import json

    run_id = json.loads((exp.run_dir / "run.json").read_text())["mlflow_run_id"]
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["lr"] == "0.2"
    history = client.get_metric_history(run_id, "eval_loss_epoch")
    assert [m.step for m in history] == [6, 12]  # the global step of each epoch's end
    assert [m.value for m in history] == pytest.approx(
        exp.trainer_history.get_metric_values("eval_loss_epoch")
    )
    assert len(client.get_metric_history(run_id, "train_loss")) == 12


def test_custom_tracker_and_unknown_logger(tmp_path: Path) -> None:
    class Collect(Tracker):
        name = "collect"

        def __init__(self) -> None:
            self.rows: list = []
            self.closed = False

        def log_metrics(self, rows) -> None:
            self.rows.extend(rows)

        def close(self) -> None:
            self.closed = True

    tracker = Collect()
    _run(tmp_path, (tracker,))
    assert tracker.closed and sum(r["scope"] == "epoch" for r in tracker.rows) == 2
    with pytest.raises(Exception, match="Unknown logger 'neptune'"):
        _run(tmp_path, ("neptune",))
