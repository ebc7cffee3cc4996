"""A second train() restarts torch's own schedulers from the peak, as the README says of
every schedule. torch's chainable schedulers (CosineAnnealingLR, StepLR, LinearLR...) start
from the group's current rate, which the first run left where it ended: a cosine ending at
0 trained the whole second run at learning rate 0, without a word."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, StepLR
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.schedulers import TrainerPlaceholderValues as T


class Recording(Trainer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lrs: list[float] = []

    def optimizer_step(self) -> None:
        self.lrs.append(self.optimizer.param_groups[0]["lr"])
        super().optimizer_step()


SCHEDULES = [
    functools.partial(CosineAnnealingLR, T_max=T.TOTAL_UPDATE_STEPS),
    functools.partial(StepLR, step_size=2, gamma=0.5),
    functools.partial(LinearLR, start_factor=1.0, end_factor=0.1, total_iters=4),
]


@pytest.mark.parametrize("make", SCHEDULES, ids=lambda f: f.func.__name__)
def test_each_train_restarts_the_schedule_from_the_peak(make: Any) -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(12, 2), torch.randn(12, 1))
    model = torch.nn.Linear(2, 1)
    trainer = Recording(model, torch.nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1),
                        callbacks=[])  # fmt: skip
    runs = []
    for _ in range(2):
        trainer.lrs = []
        trainer.train(data, num_epochs=1, per_device_batch_size=3, create_scheduler_fn=make)
        runs.append(trainer.lrs)
    assert runs[0][0] == 0.1 and runs[1] == pytest.approx(runs[0]), runs
    # A rate set by hand between the runs is the next schedule's peak; a run without a
    # scheduler keeps the rate the last run ended with.
    trainer.optimizer.param_groups[0]["lr"] = 0.02
    trainer.lrs = []
    trainer.train(data, num_epochs=1, per_device_batch_size=3, create_scheduler_fn=make)
    assert trainer.lrs[0] == pytest.approx(0.02)
    ended = trainer.optimizer.param_groups[0]["lr"]
    trainer.lrs = []
    trainer.train(data, num_epochs=1, per_device_batch_size=3)
    assert trainer.lrs == [ended] * 4
