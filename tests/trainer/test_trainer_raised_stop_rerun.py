"""A run that a callback ended by raising ``StopTrainingError`` (rather than calling
``trainer.stop_training()``), run again with the same arguments and ``resume_from="auto"``
(the same command after a crash past ``train()``, a requeue): the rerun must not train on,
as for a run ``stop_training()`` ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tests.resume.test_early_stopped_run_rerun import train_again_or_anew

from scramjet import Trainer
from scramjet.callbacks import EarlyStoppingCallback, StopTrainingError, TrainerCallback

STOP_AFTER_EPOCHS = 3
PLANNED_EPOCHS = 8
BATCHES_PER_EPOCH = 4


class RaiseAtTarget(TrainerCallback):
    """Raises StopTrainingError once the run has trained STOP_AFTER_EPOCHS epochs."""

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.epoch + 1 >= STOP_AFTER_EPOCHS:
            raise StopTrainingError("target reached")


def test_rerunning_a_run_a_raised_stop_ended_trains_no_further(tmp_path: Path) -> None:
    first = train_again_or_anew(tmp_path / "ckpt", [RaiseAtTarget()], PLANNED_EPOCHS)
    stopped_at = STOP_AFTER_EPOCHS * BATCHES_PER_EPOCH
    assert first.state.global_step == stopped_at
    assert isinstance(first.stop_reason, StopTrainingError)
    weights = {k: v.clone() for k, v in first.model.state_dict().items()}

    rerun = train_again_or_anew(tmp_path / "ckpt", [], PLANNED_EPOCHS)

    assert rerun.state.global_step == stopped_at, "the rerun trained on past the raised stop"
    assert rerun.stop_reason is not None
    for name, value in rerun.model.state_dict().items():
        assert torch.equal(value, weights[name]), name


def test_a_longer_rerun_of_a_run_a_raised_stop_ended_trains_on(tmp_path: Path) -> None:
    train_again_or_anew(tmp_path / "ckpt", [RaiseAtTarget()], PLANNED_EPOCHS)

    longer = train_again_or_anew(tmp_path / "ckpt", [], PLANNED_EPOCHS + 1)

    assert longer.stop_reason is None
    assert longer.state.global_step == (PLANNED_EPOCHS + 1) * BATCHES_PER_EPOCH


def test_an_early_stopped_run_rerun_with_more_patience_trains_on(tmp_path: Path) -> None:
    """Early stopping keeps its own count in the checkpoint and judges a rerun by it: a
    rerun given a larger patience trains on, as its message says."""
    scores = [1.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1]  # best at epoch 2, then worse

    class Score(TrainerCallback):
        def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
            trainer.run_history.update_metric("score", scores[trainer.state.epoch])

    def run(patience: int) -> Trainer:
        stopper = EarlyStoppingCallback(
            early_stopping_patience=patience, early_stopping_threshold=0.0, watch_metric="score"
        )
        return train_again_or_anew(tmp_path / "ckpt", [Score(), stopper], len(scores))

    assert run(patience=2).state.global_step == 4 * BATCHES_PER_EPOCH

    rerun = run(patience=3)

    assert rerun.state.global_step == 5 * BATCHES_PER_EPOCH, "the patient rerun did not train on"
    assert rerun.stop_reason is not None and "early stop" in str(rerun.stop_reason).lower()


class RaiseMidEpoch(TrainerCallback):
    """Raises StopTrainingError after the second update of the second epoch."""

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == BATCHES_PER_EPOCH + 2:
            raise StopTrainingError("target reached mid-epoch")


def test_rerunning_a_run_a_raised_stop_ended_mid_epoch_trains_no_further(tmp_path: Path) -> None:
    first = train_again_or_anew(tmp_path / "ckpt", [RaiseMidEpoch()], PLANNED_EPOCHS)
    assert first.state.global_step == BATCHES_PER_EPOCH + 2

    rerun = train_again_or_anew(tmp_path / "ckpt", [], PLANNED_EPOCHS)

    assert rerun.state.global_step == BATCHES_PER_EPOCH + 2, "the rerun trained on"
    assert rerun.stop_reason is not None
