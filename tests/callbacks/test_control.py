"""Behaviour of the run-control callbacks: NaN guard, early stopping, limits, step evaluation."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
import torch
from tests.common.world import (
    Recorder,
    TinyMLP,
    assert_same_weights,
    blobs,
    clone,
    make_trainer,
)
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import StopTrainingError, Trainer
from scramjet.callbacks import (
    CallbackError,
    EarlyStoppingCallback,
    LimitBatchesCallback,
    LimitEvalStepsCallback,
    StepBasedEvaluationCallback,
    TerminateOnNaNCallback,
    TrainingNaNError,
)


def _with_nan_at(index: int, n: int = 24) -> TensorDataset:
    x, y = blobs(n=n).tensors
    x = x.clone()
    x[index, 0] = float("nan")
    return TensorDataset(x, y)


def test_terminate_on_nan_stops_cleanly_and_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_exit(*args: Any) -> None:
        raise AssertionError("sys.exit must never be called")

    monkeypatch.setattr(sys, "exit", no_exit)
    log: list[str] = []
    model = TinyMLP()
    trainer = make_trainer(model, callbacks=[TerminateOnNaNCallback(check_every=2), Recorder(log)])
    with pytest.raises(
        TrainingNaNError,
        match=r"loss is nan at batch 4 of epoch 1 \(after 3 optimizer steps\).*clip gradients",
    ) as info:
        trainer.train(
            _with_nan_at(13),
            num_epochs=3,
            per_device_batch_size=4,
            train_dataloader_kwargs={"shuffle": False},
        )
    assert trainer.stop_reason is info.value
    assert trainer.state.global_step == 3, "the NaN batch was never applied"
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    assert log[-2:] == ["on_stop_training_error", "on_train_run_end"], "the run ended normally"
    assert "on_train_epoch_end" not in log


def test_terminate_on_nan_without_raising() -> None:
    trainer = make_trainer(TinyMLP(), callbacks=[TerminateOnNaNCallback(raise_error=False)])
    trainer.train(
        _with_nan_at(21),
        num_epochs=3,
        per_device_batch_size=4,
        train_dataloader_kwargs={"shuffle": False},
    )
    assert isinstance(trainer.stop_reason, TrainingNaNError)
    assert "batch 6 of epoch 1" in str(trainer.stop_reason)
    # On the CPU the NaN batch is caught at its own step, before epoch 1 ends.
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 0


def test_finite_losses_do_not_stop() -> None:
    trainer = make_trainer(TinyMLP(), callbacks=[TerminateOnNaNCallback(check_every=4)])
    trainer.train(blobs(n=24), num_epochs=2, per_device_batch_size=4)
    assert trainer.stop_reason is None and trainer.state.global_step == 12


class ScriptedMetric(Trainer):
    """Records a scripted ``score`` at each epoch end, so a test controls the metric."""

    scores: list[float] = []

    def train_epoch_end(self) -> None:
        super().train_epoch_end()
        epoch = len(self.run_history.get_metric_values("score"))
        self.run_history.update_metric("score", self.scores[epoch])


def test_early_stopping_after_patience() -> None:
    cls = type("Scripted", (ScriptedMetric,), {"scores": [1.0, 0.5, 0.6, 0.495, 0.7, 0.1]})
    log: list[str] = []
    stopper = EarlyStoppingCallback(
        early_stopping_patience=2, early_stopping_threshold=0.01, watch_metric="score"
    )
    trainer = make_trainer(TinyMLP(), callbacks=[stopper, Recorder(log)], trainer_cls=cls)
    trainer.train(blobs(n=8), num_epochs=6, per_device_batch_size=4)
    # 0.495 is better than 0.5 by less than the threshold: not an improvement.
    assert trainer.run_history.get_metric_values("score") == [1.0, 0.5, 0.6, 0.495]
    assert isinstance(trainer.stop_reason, StopTrainingError)
    assert "score has not improved on 0.5 for 2 epoch(s)" in str(trainer.stop_reason)
    assert log[-2:] == ["on_stop_training_error", "on_train_run_end"]
    assert stopper.state_dict() == {"best": 0.5, "epochs_without_improvement": 2}


def test_early_stopping_greater_is_better() -> None:
    cls = type("Scripted", (ScriptedMetric,), {"scores": [0.1, 0.5, 0.9, 0.95, 0.2, 0.2]})
    stopper = EarlyStoppingCallback(1, 0.0, watch_metric="score", greater_is_better=True)
    trainer = make_trainer(TinyMLP(), callbacks=[stopper], trainer_cls=cls)
    trainer.train(blobs(n=8), num_epochs=6, per_device_batch_size=4)
    assert trainer.run_history.get_metric_values("score") == [0.1, 0.5, 0.9, 0.95, 0.2]


def _count_batches(log: list[str]) -> tuple[int, int]:
    return log.count("on_train_step_end"), log.count("on_eval_step_end")


def test_limit_batches_limits_train_and_eval() -> None:
    log: list[str] = []
    trainer = make_trainer(TinyMLP(), callbacks=[LimitBatchesCallback(2), Recorder(log)])
    trainer.train(blobs(n=24), num_epochs=3, per_device_batch_size=4, eval_dataset=blobs(n=20))
    assert _count_batches(log) == (6, 6)
    assert trainer.state.global_step == 6
    assert trainer.state.samples_seen == 24


def test_limit_batches_closes_a_short_accumulation_window() -> None:
    """Stopping after 2 of a 3-batch window applies one update averaging those 2 batches."""
    data = blobs(n=24)
    model = TinyMLP()
    expected = clone(model)
    opt = torch.optim.SGD(expected.parameters(), lr=0.1)
    x, y = data.tensors
    for _ in range(2):
        opt.zero_grad()
        for i in (0, 4):
            (nn.functional.cross_entropy(expected(x[i : i + 4]), y[i : i + 4]) / 2).backward()
        opt.step()
    trainer = make_trainer(model, callbacks=[LimitBatchesCallback(2)])
    trainer.train(
        data,
        num_epochs=2,
        per_device_batch_size=4,
        gradient_accumulation_steps=3,
        train_dataloader_kwargs={"shuffle": False},
    )
    assert trainer.state.global_step == 2
    assert_same_weights(model, expected)


def test_limit_eval_steps_limits_only_eval() -> None:
    log: list[str] = []
    trainer = make_trainer(TinyMLP(), callbacks=[LimitEvalStepsCallback(1), Recorder(log)])
    trainer.train(blobs(n=24), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=20))
    assert _count_batches(log) == (12, 2)
    trainer.evaluate(blobs(n=20), per_device_batch_size=4)
    assert _count_batches(log) == (12, 3)


class ModeProbe(Trainer):
    """Records whether the model was in training mode for every training batch."""

    modes: list[bool]

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        self.modes = [*getattr(self, "modes", []), self.model.training]
        return super().calculate_train_batch_loss(batch)


def test_step_based_evaluation() -> None:
    callback = StepBasedEvaluationCallback(eval_every_n_steps=2)
    log: list[str] = []
    trainer = make_trainer(TinyMLP(), callbacks=[callback, Recorder(log)], trainer_cls=ModeProbe)
    assert isinstance(trainer, ModeProbe)
    trainer.train(blobs(n=20), num_epochs=1, per_device_batch_size=4, eval_dataset=blobs(n=8))
    # 5 updates: evaluations after updates 2 and 4, plus the end-of-epoch one.
    assert callback.evaluations == 2
    assert len(trainer.run_history.get_metric_values("eval_loss_epoch")) == 3
    assert trainer.modes == [True] * 5, "training resumes in train mode after each evaluation"
    first_eval = log.index("on_evaluation_run_start")
    assert log[:first_eval].count("on_train_step_end") == 2


@pytest.mark.parametrize("max_steps", [None, 4])
def test_step_based_evaluation_leaves_the_epochs_last_update_to_the_epoch_end(
    max_steps: int | None,
) -> None:
    callback = StepBasedEvaluationCallback(eval_every_n_steps=2)
    trainer = make_trainer(TinyMLP(), callbacks=[callback])
    trainer.train(blobs(n=24), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=8),
                  max_num_train_steps=max_steps)  # fmt: skip
    # 6 updates an epoch: after updates 2 and 4, and at each epoch's end (not again at 6).
    # With max_num_train_steps=4: after update 2, and at the end (not again at 4).
    evaluations = trainer.run_history.get_metric_values("eval_loss_epoch")
    assert callback.evaluations == (4 if max_steps is None else 1)
    assert (
        len(evaluations)
        == len(set(evaluations))
        == callback.evaluations + (2 if max_steps is None else 1)
    )


def test_step_based_evaluation_needs_eval_data() -> None:
    trainer = make_trainer(TinyMLP(), callbacks=[StepBasedEvaluationCallback(1)])
    message = re.escape("run_evaluation() needs train(..., eval_dataset=...)")
    with pytest.raises(CallbackError, match=message):
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)


@pytest.mark.parametrize(
    "make",
    [
        lambda: TerminateOnNaNCallback(check_every=0),
        lambda: EarlyStoppingCallback(0),
        lambda: LimitBatchesCallback(0),
        lambda: LimitEvalStepsCallback(0),
        lambda: StepBasedEvaluationCallback(0),
    ],
)
def test_bad_arguments(make: Any) -> None:
    with pytest.raises(ValueError, match="received 0"):
        make()


def test_limits_and_step_based_evaluation_do_not_interfere() -> None:
    """Evaluations inside a training epoch keep their own batch count and end-of-epoch flag."""
    log: list[str] = []
    callbacks = [LimitBatchesCallback(2), StepBasedEvaluationCallback(1), Recorder(log)]
    trainer = make_trainer(TinyMLP(), callbacks=callbacks)
    trainer.train(blobs(n=24), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=12))
    # Per epoch: 2 training batches; 3 evaluations (after each update, and at the epoch end)
    # of 2 batches each.
    assert _count_batches(log) == (4, 12)
    assert trainer.state.global_step == 4
