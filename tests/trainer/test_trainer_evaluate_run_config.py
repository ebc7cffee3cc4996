"""A standalone evaluate() records its own settings in trainer.run_config, as documented
("settings of the current (or last) run, fixed when train()/evaluate() starts")."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback


class _SeenBatchSize(TrainerCallback):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.seen.append(trainer.run_config.eval_per_device_batch_size)


def _data(n: int = 20) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 3, generator=g), torch.randint(0, 2, (n,), generator=g))


def _trainer(callback: TrainerCallback) -> Trainer:
    model = nn.Linear(3, 2)
    return Trainer(
        model,
        loss_func=nn.CrossEntropyLoss(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[callback],
    )


def test_evaluate_after_train_records_its_batch_size() -> None:
    seen = _SeenBatchSize()
    trainer = _trainer(seen)
    trainer.train(_data(), num_epochs=1, per_device_batch_size=4)
    trainer.evaluate(_data(), per_device_batch_size=16)
    assert trainer.run_config.eval_per_device_batch_size == 16
    assert seen.seen == [16]
    trainer.evaluate(DataLoader(_data(), batch_size=5))
    assert trainer.run_config.eval_per_device_batch_size == 5
    assert seen.seen == [16, 5]
    # the training settings of the last train() are kept
    assert trainer.run_config.train_per_device_batch_size == 4


def test_repeated_standalone_evaluate_records_each_batch_size() -> None:
    seen = _SeenBatchSize()
    trainer = _trainer(seen)
    trainer.evaluate(_data(), per_device_batch_size=3)
    trainer.evaluate(_data(), per_device_batch_size=7)
    assert seen.seen == [3, 7]
    assert trainer.run_config.eval_per_device_batch_size == 7
