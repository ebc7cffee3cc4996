"""Two things code written for pytorch-accelerated reads after a run.

- A run that ends inside an epoch (``max_num_train_steps``, ``stop_training()``) still ran
  that epoch's end events, so a second ``train(..., reset_run_history=False)`` numbers its
  first epoch after it: callbacks that name files or log by ``current_epoch`` do not meet
  the same epoch number twice.
- A standalone ``evaluate(ds, per_device_batch_size=N)`` records N in every batch-size field
  of ``run_config``, not only in ``eval_per_device_batch_size``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tests.common.pa_history import DictHistory
from torch import nn
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated import Trainer
from scramjet.compat.pytorch_accelerated.callbacks import TrainerCallback
from scramjet.compat.pytorch_accelerated.tracking import RunHistory


class EpochNumbers(TrainerCallback):
    def __init__(self) -> None:
        self.numbers: list[int] = []

    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        self.numbers.append(trainer.run_history.current_epoch)


class StopAtStep(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step: int | None = step

    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            trainer.stop_training()


def data(n: int = 100) -> TensorDataset:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(0))
    return TensorDataset(x, (x[:, 0] > 0).long())


def make_trainer(*callbacks: TrainerCallback, history: RunHistory | None = None) -> Trainer:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=callbacks,
                   run_history=history)  # fmt: skip


@pytest.mark.parametrize("history", ["default", "own"])
@pytest.mark.parametrize("how", ["max_num_train_steps", "stop_training"])
def test_a_run_after_one_that_ended_inside_an_epoch_numbers_a_new_epoch(
    how: str, history: str
) -> None:
    numbers, stop = EpochNumbers(), StopAtStep(10)
    own = DictHistory() if history == "own" else None
    if how == "max_num_train_steps":  # 7 updates an epoch: the second epoch stops after 3
        trainer = make_trainer(numbers, history=own)
        trainer.train(data(), num_epochs=2, per_device_batch_size=16, max_num_train_steps=10)
    else:
        trainer = make_trainer(numbers, stop, history=own)
        trainer.train(data(), num_epochs=3, per_device_batch_size=16)
    assert 0 < trainer.state.batches_seen_in_epoch < 7  # the run ended inside epoch 2
    assert numbers.numbers == [1, 2]
    stop.step = None  # the second run trains its whole epochs
    trainer.train(data(), num_epochs=2, per_device_batch_size=16, reset_run_history=False)
    assert numbers.numbers == [1, 2, 3, 4]
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 4
    assert trainer.run_history.current_epoch == 5


def test_a_run_after_whole_epochs_or_with_a_reset_history_numbers_as_before() -> None:
    numbers = EpochNumbers()
    trainer = make_trainer(numbers)
    trainer.train(data(), num_epochs=2, per_device_batch_size=16)
    trainer.train(data(), num_epochs=1, per_device_batch_size=16, reset_run_history=False)
    assert numbers.numbers == [1, 2, 3]
    trainer.train(data(), num_epochs=1, per_device_batch_size=16, max_num_train_steps=3)
    trainer.train(data(), num_epochs=1, per_device_batch_size=16)  # history reset: epoch 1
    assert numbers.numbers == [1, 2, 3, 1, 1]


class EvalBatchSizes(TrainerCallback):
    def __init__(self) -> None:
        self.sizes: list[int] = []

    def on_eval_step_end(self, trainer: Any, batch: Any, **kwargs: Any) -> None:
        self.sizes.append(len(batch[0]))


def eval_sizes(trainer: Trainer) -> tuple[int, int, int]:
    config = trainer.run_config
    return (config.eval_per_device_batch_size, config.eval_dl_kwargs["batch_size"],
            config.eval_total_batch_size)  # fmt: skip


def test_a_standalone_evaluate_records_its_batch_size_in_every_field() -> None:
    sizes = EvalBatchSizes()
    trainer = make_trainer(sizes)
    trainer.evaluate(data(64), per_device_batch_size=8)  # before any train()
    assert eval_sizes(trainer) == (8, 8, 8)
    trainer.train(data(64), num_epochs=1, eval_dataset=data(64), per_device_batch_size=16)
    assert eval_sizes(trainer) == (16, 16, 16)
    sizes.sizes.clear()
    trainer.evaluate(data(64), per_device_batch_size=32)
    assert sizes.sizes == [32, 32]
    assert eval_sizes(trainer) == (32, 32, 32)
    assert trainer.run_config.train_per_device_batch_size == 16  # the last train() kept
    trainer.evaluate(data(64), dataloader_kwargs={"batch_size": 64})
    assert eval_sizes(trainer) == (64, 64, 64)
