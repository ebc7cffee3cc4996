"""MLflow keeps every metric and param of a run when one name is longer than it allows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment
from scramjet.tracking.loggers.mlflow import mlflow_name

_LONG = "accuracy_of_" + "x" * 300
_OTHER_LONG = "accuracy_of_" + "x" * 290 + "y" * 10  # the same first 250 characters


class _LogLong(TrainerCallback):
    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log(_LONG, 0.5)
        trainer.log(_OTHER_LONG, 0.25)


def test_a_metric_or_param_name_past_250_characters_loses_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow refuses names over 250 characters for a whole batch: one such metric name
    left the MLflow run without any metric (train_loss, lr, eval_loss_epoch included) and
    one such hyperparameter without any param, with no message on the console (only
    ``logger_errors`` in run.json)."""
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    hyper = {"k" * 300: 1, "lr": 0.2}
    exp = Experiment("proj", "long", root="runs", loggers=("csv", "mlflow"), hyperparams=hyper)
    with pytest.warns(UserWarning, match="longer than"):
        make_trainer([exp, _LogLong()]).train(
            tiny_data(32), 2, eval_dataset=tiny_data(16, 1), per_device_batch_size=16
        )
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert "logger_errors" not in info, info["logger_errors"]
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    run = client.get_run(info["mlflow_run_id"])
    metrics, params = run.data.metrics, run.data.params
    assert {"train_loss", "lr", "train_loss_epoch", "eval_loss_epoch"} <= set(metrics)
    long_names = {mlflow_name(_LONG), mlflow_name(_OTHER_LONG)}
    assert len(long_names) == 2 and all(len(n) <= 250 for n in long_names)
    assert {metrics[mlflow_name(_LONG)], metrics[mlflow_name(_OTHER_LONG)]} == {0.5, 0.25}
    assert params["lr"] == "0.2" and params[mlflow_name("k" * 300)] == "1"
