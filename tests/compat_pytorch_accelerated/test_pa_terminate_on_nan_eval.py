"""pytorch-accelerated's TerminateOnNaNCallback stops the run on a non-finite loss in
training or in evaluation, and records that it did in ``triggered``."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet.callbacks.control import TrainingNaNError
from scramjet.compat.pytorch_accelerated import DEFAULT_CALLBACKS, Trainer
from scramjet.compat.pytorch_accelerated.callbacks import (
    TerminateOnNaNCallback,
    get_default_callbacks,
)


def _data(nan_row: int | None = None) -> TensorDataset:
    x = torch.randn(12, 4, generator=torch.Generator().manual_seed(0))
    if nan_row is not None:
        x[nan_row] = float("nan")
    return TensorDataset(x, x.sum(dim=1, keepdim=True))


def _trainer(callback: TerminateOnNaNCallback) -> Trainer:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return Trainer(model, torch.nn.MSELoss(), opt, callbacks=[callback])


def test_nan_evaluation_loss_stops_the_run() -> None:
    callback = TerminateOnNaNCallback()
    trainer = _trainer(callback)
    with pytest.raises(TrainingNaNError, match="evaluation"):
        trainer.train(
            train_dataset=_data(), eval_dataset=_data(nan_row=5), num_epochs=3,
            per_device_batch_size=4,
        )  # fmt: skip
    assert callback.triggered
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 1


def test_finite_run_is_not_triggered_and_nan_training_loss_is() -> None:
    callback = TerminateOnNaNCallback()
    trainer = _trainer(callback)
    trainer.train(
        train_dataset=_data(), eval_dataset=_data(), num_epochs=2, per_device_batch_size=4
    )
    assert not callback.triggered
    assert len(trainer.run_history.get_metric_values("eval_loss_epoch")) == 2
    callback = TerminateOnNaNCallback()
    with pytest.raises(TrainingNaNError):
        _trainer(callback).train(
            train_dataset=_data(nan_row=0), num_epochs=1, per_device_batch_size=4
        )
    assert callback.triggered


def test_default_callbacks_use_the_peer_callback() -> None:
    assert TerminateOnNaNCallback in DEFAULT_CALLBACKS
    assert TerminateOnNaNCallback in get_default_callbacks()
