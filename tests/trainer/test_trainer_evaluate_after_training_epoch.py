"""``trainer.evaluate(data)`` called after ``train()`` is labelled with the last epoch
trained (the weights it measures), in the printed metrics and in the run history's
``current_epoch`` that callbacks read; not with the next epoch, which never ran."""

from __future__ import annotations

import io
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import LogMetricsCallback, TrainerCallback


class _EpochAtEvaluationEnd(TrainerCallback):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.seen.append(trainer.run_history.current_epoch)


class _StopAtStep(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            trainer.stop_training()


def _data(n: int = 16) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    return TensorDataset(torch.randn(n, 4, generator=g), torch.randint(0, 2, (n,), generator=g))


def _trainer(callbacks: list[TrainerCallback]) -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=callbacks, seed=0)


def test_evaluate_after_training_is_labelled_with_the_last_trained_epoch() -> None:
    out, seen = io.StringIO(), _EpochAtEvaluationEnd()
    trainer = _trainer([LogMetricsCallback(file=out), seen])
    trainer.train(_data(), num_epochs=2, per_device_batch_size=4)
    out.truncate(0), out.seek(0)

    trainer.evaluate(_data(8), per_device_batch_size=4)

    assert out.getvalue().startswith("epoch 2 | eval_loss_epoch"), out.getvalue()
    assert seen.seen == [2]
    assert trainer.run_history.current_epoch == 3  # the next run starts at epoch 3
    trainer.train(_data(), num_epochs=1, per_device_batch_size=4, reset_run_history=False)
    assert "epoch 3 | " in out.getvalue() and "epoch 4" not in out.getvalue(), out.getvalue()


def test_evaluate_after_a_run_stopped_mid_epoch_names_that_epoch() -> None:
    out, seen = io.StringIO(), _EpochAtEvaluationEnd()
    trainer = _trainer([LogMetricsCallback(file=out), seen, _StopAtStep(6)])
    trainer.train(_data(), num_epochs=3, per_device_batch_size=4)  # 4 steps per epoch
    assert trainer.state.global_step == 6

    trainer.evaluate(_data(8), per_device_batch_size=4)

    assert seen.seen == [2]
    assert "epoch 2 | eval_loss_epoch" in out.getvalue(), out.getvalue()


def test_evaluate_before_any_training_is_epoch_one() -> None:
    seen = _EpochAtEvaluationEnd()
    trainer = _trainer([seen])

    trainer.evaluate(_data(8), per_device_batch_size=4)
    trainer.evaluate(_data(8), per_device_batch_size=4)

    assert seen.seen == [1, 1]
    assert trainer.run_history.current_epoch == 1
