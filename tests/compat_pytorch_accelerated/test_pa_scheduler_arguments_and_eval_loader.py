"""pytorch-accelerated programs that passed the schedulers' arguments by the peer's names
and order (``total_num_epochs``, ``num_update_steps_per_epoch``, ``num_warmup_epochs``;
``WSDLrScheduler(optimizer, num_epochs, num_update_steps_per_epoch)``) run unchanged, and a
callback that sizes a standalone evaluation from ``trainer._eval_dataloader`` sees the
loader being evaluated (it saw None, or the loader of the last ``train()``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated import Trainer, TrainerPlaceholderValues
from scramjet.compat.pytorch_accelerated.callbacks import TrainerCallback
from scramjet.compat.pytorch_accelerated.schedulers import CosineLrScheduler, WSDLrScheduler


def _data(n: int = 40) -> TensorDataset:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(0))
    return TensorDataset(x, (x[:, 0] > 0).long())


def _trainer(callbacks: Any = ()) -> Trainer:
    model = nn.Linear(4, 2)
    return Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
                   callbacks=callbacks)  # fmt: skip


_PLACEHOLDERS = {
    "total_num_epochs": TrainerPlaceholderValues.NUM_EPOCHS,
    "num_update_steps_per_epoch": TrainerPlaceholderValues.NUM_UPDATE_STEPS_PER_EPOCH,
}


@pytest.mark.parametrize(
    ("args", "kwargs", "updates"),
    [
        ((), {**_PLACEHOLDERS, "num_warmup_epochs": 1}, 16),  # 4 epochs of 4 updates
        ((), {"total_num_epochs": 10, "num_warmup_epochs": 1}, 40),
        ((8, 5), {}, 40),  # positional, in the peer's order
    ],
)
def test_cosine_scheduler_fn_takes_the_peers_arguments(
    args: tuple[int, ...], kwargs: dict[str, Any], updates: int
) -> None:
    fn = CosineLrScheduler.create_scheduler_fn(*args, **kwargs)
    trainer = _trainer()
    trainer.train(_data(), num_epochs=4, per_device_batch_size=10, create_scheduler_fn=fn)
    sched = trainer.scheduler
    assert sched.num_warmup_steps + sched.num_decay_steps + sched.num_cooldown_steps == updates


def test_wsd_scheduler_takes_the_peers_arguments() -> None:
    opt = torch.optim.SGD(nn.Linear(4, 2).parameters(), lr=0.1)
    assert WSDLrScheduler(opt, num_epochs=10, num_update_steps_per_epoch=100).total_steps == 1000
    assert WSDLrScheduler(opt, 10, 100).total_steps == 1000  # positional, peer's order
    assert WSDLrScheduler(opt, total_steps=50).total_steps == 50
    with pytest.raises(ValueError, match="give the run's length once"):
        WSDLrScheduler(opt, 10, 100, total_steps=50)
    trainer = _trainer()
    data = _data(400)
    fn = WSDLrScheduler.create_scheduler_fn(num_warmup_epochs=1)
    trainer.train(data, num_epochs=2, per_device_batch_size=2, create_scheduler_fn=fn)
    assert trainer.scheduler.total_steps == 400 and trainer.scheduler.num_warmup_steps == 200
    trainer.train(data, num_epochs=2, per_device_batch_size=2,
                  create_scheduler_fn=WSDLrScheduler.create_scheduler_fn())  # fmt: skip
    assert trainer.scheduler.num_warmup_steps == 4  # the peer's default: 1% of the run


class _Progress(TrainerCallback):
    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def on_eval_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        self.total, self.done = len(trainer._eval_dataloader), 0

    def on_eval_step_end(self, trainer: Any, **kwargs: Any) -> None:
        self.done += 1

    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        self.seen.append((self.done, self.total))


def test_a_standalone_evaluation_sizes_itself_from_the_peers_eval_dataloader() -> None:
    fresh = _Progress()
    _trainer([fresh]).evaluate(_data(16), per_device_batch_size=8)  # was len(None)
    assert fresh.seen == [(2, 2)]
    progress = _Progress()
    trainer = _trainer([progress])
    trainer.train(_data(), num_epochs=1, eval_dataset=_data(), per_device_batch_size=8)
    trainer.evaluate(_data(16), per_device_batch_size=8)  # was sized by train()'s loader
    assert progress.seen == [(5, 5), (2, 2)]
    assert len(trainer._eval_dataloader) == 2
    trainer.train(_data(), num_epochs=1, per_device_batch_size=8)
    assert trainer._eval_dataloader is None  # the next train() without evaluation
