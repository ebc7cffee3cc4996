"""pytorch-accelerated's schedulers in a training run, imports changed: the learning rate
each optimizer update runs at, compared with the schedule the peer sets."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated.schedulers import CosineLrScheduler
from scramjet.compat.pytorch_accelerated.trainer import Trainer


class _RecordingTrainer(Trainer):
    """Notes the learning rate each optimizer update runs at."""

    lrs: list[float]

    def optimizer_step(self) -> None:
        self.lrs.append(self.optimizer.param_groups[0]["lr"])
        super().optimizer_step()


def _trainer(lr: float = 0.1) -> _RecordingTrainer:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    trainer = _RecordingTrainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=lr), callbacks=()
    )
    trainer.lrs = []
    return trainer


def _data(n: int = 40) -> TensorDataset:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(1))
    return TensorDataset(x, (x[:, 0] > 0).long())


def test_warmup_starts_at_warmup_starting_lr_not_at_the_optimizers() -> None:
    trainer = _trainer(lr=0.1)
    start = 1e-3
    fn = CosineLrScheduler.create_scheduler_fn(num_warmup_epochs=1, warmup_starting_lr=start)
    trainer.train(_data(), num_epochs=4, per_device_batch_size=8, create_scheduler_fn=fn)
    per_epoch = 5
    assert len(trainer.lrs) == 4 * per_epoch
    # No update of the warm-up runs above the warm-up line, the first one included.
    assert trainer.lrs[0] == start
    assert max(trainer.lrs[:per_epoch]) < 0.1
    warmup = trainer.lrs[: per_epoch + 1]
    assert warmup == sorted(warmup)


def test_warmup_ratio_starts_each_group_at_its_ratio() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(
        [{"params": [model.weight]}, {"params": [model.bias], "lr": 0.02}], lr=0.1
    )
    scheduler = CosineLrScheduler(
        optimizer, total_num_epochs=3, num_update_steps_per_epoch=4,
        num_warmup_epochs=1, warmup_starting_lr_ratio=0.1,
    )  # fmt: skip
    assert [g["lr"] for g in optimizer.param_groups] == [0.1 * 0.1, 0.1 * 0.02]
    assert scheduler.base_lr_values == [0.1, 0.02]


def test_second_run_starts_at_the_base_lr_not_at_the_last_runs_floor() -> None:
    trainer = _trainer(lr=0.1)
    fn = CosineLrScheduler.create_scheduler_fn(lr_min=1e-4)
    trainer.train(_data(), num_epochs=2, per_device_batch_size=8, create_scheduler_fn=fn)
    trainer.lrs = []
    trainer.train(_data(), num_epochs=2, per_device_batch_size=8, create_scheduler_fn=fn)
    total = len(trainer.lrs)
    # The cosine from the group's starting value, as a fresh scheduler sets it: update 1
    # at the base value, then update n at the value for n - 1 previous updates.
    expected = [0.1] + [
        1e-4 + (0.1 - 1e-4) * 0.5 * (1 + math.cos(math.pi * n / total)) for n in range(total - 1)
    ]
    assert len(trainer.lrs) == len(expected)
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(trainer.lrs, expected))
