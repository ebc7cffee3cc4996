"""Every logger keeps what the trainer logged: a value beyond float32 no longer costs
TensorBoard the rows it came with; an evaluation logged inside an epoch before (or at) a
mid-epoch checkpoint stays in metrics.csv after a resume; two names MLflow's rules make
one stay two; a value the user names ``epoch`` is the one every logger shows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import StepBasedEvaluationCallback, TrainerCallback
from scramjet.tracking import Experiment, read_metrics


class _Log(TrainerCallback):
    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step + 1 == 3:
            trainer.log("perplexity", 1e39)  # beyond float32: inf in TensorBoard

    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("big_epoch", 1e300)
        trainer.log("epoch", 99.0)
        trainer.log("acc@1", 1.0)
        trainer.log("acc_1", 2.0)


def test_large_values_names_mlflow_merges_and_a_users_epoch_reach_every_logger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    exp = Experiment("proj", "big", root="runs", loggers=("csv", "tensorboard", "mlflow"),
                     log_every_n_steps=1, checkpoint=None)  # fmt: skip
    with pytest.warns(UserWarning, match="MLflow already records 'acc"):
        make_trainer([_Log(), exp]).train(
            tiny_data(32), 2, eval_dataset=tiny_data(16, 1), per_device_batch_size=8
        )
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert "logger_errors" not in info, info["logger_errors"]
    board = EventAccumulator(str(exp.run_dir))
    board.Reload()
    assert [e.step for e in board.Scalars("train_loss")] == list(range(1, 9))
    assert [e.value for e in board.Scalars("perplexity")] == [math.inf]
    assert [e.value for e in board.Scalars("big_epoch")] == [math.inf, math.inf]
    assert [e.value for e in board.Scalars("epoch")] == [99.0, 99.0]
    assert len(board.Scalars("eval_loss_epoch")) == 2
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    run = info["mlflow_run_id"]
    names = set(client.get_run(run).data.metrics)
    merged = [n for n in names if n.startswith("acc_1")]
    assert len(merged) == 2, names
    values = {n: [m.value for m in client.get_metric_history(run, n)] for n in merged}
    assert sorted(values.values()) == [[1.0, 1.0], [2.0, 2.0]], values
    assert [m.value for m in client.get_metric_history(run, "epoch")] == [99.0, 99.0]


class _Crash(TrainerCallback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if self.at and trainer.state.global_step + 1 == self.at:
            raise RuntimeError("crash")


@pytest.mark.parametrize("checkpoint", [7, 6, 4], ids=["after-eval", "at-eval", "epoch-end"])
def test_a_resume_keeps_the_evaluations_logged_before_its_checkpoint(
    tmp_path: Path, checkpoint: int
) -> None:
    # 32 samples in batches of 8: 4 updates per epoch; an evaluation every 3 updates and
    # at each epoch's end; the run crashes at update 8 and resumes from its checkpoint.
    torch.manual_seed(0)
    crash = _Crash(8)
    exp = Experiment("proj", "mid", root=tmp_path, checkpoint=checkpoint, keep_best=0,
                     log_every_n_steps=1)  # fmt: skip
    trainer = make_trainer([StepBasedEvaluationCallback(3), crash, exp])
    data, held_out = tiny_data(32), tiny_data(16, 1)
    with pytest.raises(RuntimeError, match="crash"):
        trainer.train(data, 3, eval_dataset=held_out, per_device_batch_size=8)
    crash.at = 0
    trainer.train(data, 3, eval_dataset=held_out, per_device_batch_size=8,
                  resume_from=exp.checkpoint_dir)  # fmt: skip
    evals = [r for r in read_metrics(exp.run_dir) if "eval_loss_epoch" in r["metrics"]]
    history = trainer.run_history.get_metric_values("eval_loss_epoch")
    assert [r["step"] for r in evals] == [3, 4, 6, 8, 9, 12], evals
    assert [r["metrics"]["eval_loss_epoch"] for r in evals] == pytest.approx(history)


class _Epoch(TrainerCallback):
    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("epoch", 99.0)


def test_a_value_named_epoch_reaches_wandb_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wandb_records import read_finished_wandb_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    exp = Experiment("proj", "ep", root=tmp_path, loggers=("csv", "wandb"), checkpoint=None)
    make_trainer([_Epoch(), exp]).train(tiny_data(32), 2, per_device_batch_size=16)
    history = read_finished_wandb_run(exp.run_dir)["history"]
    assert [row["epoch"] for row in history if "epoch" in row] == [99.0, 99.0], history
