"""EarlyStopping and SaveBestModel watching a metric measured every few epochs, the first
time after epoch 1: they waited for it as documented only if epoch 1 recorded one, and
otherwise stopped the run with MetricNotFoundError. A misspelt name is still an error at
the first epoch's end; a name the whole run never records is said at its end."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import (
    CallbackError,
    EarlyStoppingCallback,
    SaveBestModelCallback,
    TrainerCallback,
)
from scramjet.trainer.state import MetricNotFoundError


class EveryOtherEpoch(TrainerCallback):
    """Records 'val_map' at epochs 2, 4, ... (a costly metric), falling then rising."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def on_training_run_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        epoch = trainer.run_history.current_epoch
        if epoch % 2 == 0:
            trainer.run_history.update_metric("val_map", self.values[epoch // 2 - 1])


def _train(callbacks: list[Any], epochs: int = 8) -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.01),
                      callbacks=callbacks)  # fmt: skip
    data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    trainer.train(data, num_epochs=epochs, per_device_batch_size=4)
    return trainer


def test_a_metric_first_recorded_at_epoch_2_is_waited_for(tmp_path: Path) -> None:
    # lower is better: 0.5, 0.4, then worse twice -> patience 2 stops at epoch 8
    values = [0.5, 0.4, 0.45, 0.47]
    stopper = EarlyStoppingCallback(2, 0.0, watch_metric="val_map")
    best = SaveBestModelCallback(tmp_path / "best.pt", watch_metric="val_map")
    trainer = _train([EveryOtherEpoch(values), stopper, best])
    assert trainer.run_history.get_metric_values("val_map") == values
    assert stopper.best == 0.4 and stopper.epochs_without_improvement == 2
    assert best.best == 0.4 and (tmp_path / "best.pt").exists()


def test_a_misspelt_metric_is_still_refused_after_the_first_epoch() -> None:
    with pytest.raises(CallbackError, match=r"'train_los_epoch'.*Did you mean") as info:
        _train([EarlyStoppingCallback(2, watch_metric="train_los_epoch")], epochs=3)
    assert isinstance(info.value.__cause__, MetricNotFoundError)
    assert "on_training_run_epoch_end" in str(info.value)  # at the first epoch's end


def test_a_metric_the_run_never_records_is_said_at_its_end() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _train([EarlyStoppingCallback(2, watch_metric="val_map")], epochs=2)
    said = [str(w.message) for w in caught if "never acted" in str(w.message)]
    assert len(said) == 1 and "EarlyStoppingCallback" in said[0] and "train_loss_epoch" in said[0]


class EvalEveryOtherEpoch(TrainerCallback):
    """Records the Trainer's own eval_loss_epoch at epochs 2 and 4 (an evaluation of its own)."""

    def on_training_run_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        epoch = trainer.run_history.current_epoch
        if epoch % 2 == 0:
            trainer.run_history.update_metric("eval_loss_epoch", 1.0 / epoch)


def test_the_default_watch_metric_measured_from_epoch_2_is_waited_for() -> None:
    # eval_loss_epoch reads like train_loss_epoch to a loose similarity test, which took it
    # for a misspelling of it and stopped the run at epoch 1
    stopper = EarlyStoppingCallback(2)
    _train([EvalEveryOtherEpoch(), stopper], epochs=4)
    assert stopper.best == 0.25
