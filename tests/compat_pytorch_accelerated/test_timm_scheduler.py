"""TrainerWithTimmScheduler steps a timm-style scheduler as pytorch-accelerated 0.1.61 does.

timm is not installed: ``FakeTimm`` has the two methods the trainer calls
(``step(epoch, metric=None)`` and ``step_update(num_updates, metric=None)``) and records
each call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated.callbacks import StepBasedEvaluationCallback
from scramjet.compat.pytorch_accelerated.trainer import TrainerWithTimmScheduler


class FakeTimm:
    """A timm scheduler's interface; ``calls`` lists ("update", n) and ("epoch", e)."""

    def __init__(self, optimizer: torch.optim.Optimizer, t_in_epochs: bool = False) -> None:
        self.optimizer = optimizer
        self.t_in_epochs = t_in_epochs
        self.calls: list[tuple[str, int]] = []

    def step(self, epoch: int, metric: float | None = None) -> None:
        self.calls.append(("epoch", epoch))

    def step_update(self, num_updates: int, metric: float | None = None) -> None:
        self.calls.append(("update", num_updates))

    def state_dict(self) -> dict[str, Any]:
        return {"calls": list(self.calls)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls = [tuple(c) for c in state["calls"]]  # type: ignore[misc]


def _data(n: int = 32) -> TensorDataset:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(3))
    return TensorDataset(x, (x[:, 0] > 0).long())


def _trainer(**kwargs: Any) -> TrainerWithTimmScheduler:
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return TrainerWithTimmScheduler(
        model, torch.nn.CrossEntropyLoss(), optimizer, callbacks=kwargs.pop("callbacks", [])
    )


def _calls(trainer: TrainerWithTimmScheduler) -> list[tuple[str, int]]:
    scheduler: Any = trainer.scheduler
    return list(scheduler.calls)


def test_num_updates_and_epoch_steps_follow_the_peer() -> None:
    trainer = _trainer()
    assert trainer.num_updates is None  # the peer's attribute, None before training
    # 32 samples, batch 16: 2 batches per epoch. The peer's current_epoch is 1-based, so
    # epoch 1 counts from 1 * 2 and epoch 2 from 2 * 2; step(current_epoch + 1) follows
    # each evaluation epoch.
    trainer.train(_data(), num_epochs=2, eval_dataset=_data(8), per_device_batch_size=16,
                  create_scheduler_fn=FakeTimm)  # fmt: skip
    assert _calls(trainer) == [
        ("update", 3), ("update", 4), ("epoch", 2),
        ("update", 5), ("update", 6), ("epoch", 3),
    ]  # fmt: skip
    assert trainer.num_updates == 6
    # eval_epoch_end still records the evaluation loss.
    assert len(trainer.run_history.get_metric_values("eval_loss_epoch")) == 2


def test_no_epoch_step_without_an_eval_dataset() -> None:
    trainer = _trainer()
    trainer.train(_data(), num_epochs=2, per_device_batch_size=16, create_scheduler_fn=FakeTimm)
    assert _calls(trainer) == [("update", 3), ("update", 4), ("update", 5), ("update", 6)]


def test_a_per_epoch_scheduler_without_eval_dataset_warns() -> None:
    def per_epoch(optimizer: torch.optim.Optimizer) -> FakeTimm:
        return FakeTimm(optimizer, t_in_epochs=True)

    with pytest.warns(UserWarning, match="no eval_dataset"):
        _trainer().train(_data(), num_epochs=1, per_device_batch_size=16,
                         create_scheduler_fn=per_epoch)  # fmt: skip


def test_num_updates_counts_loader_batches_with_gradient_accumulation() -> None:
    # As the peer: each epoch starts at current_epoch * len(train_dataloader) (4 batches),
    # then adds one per optimizer update (2 per epoch with accumulation over 2 batches).
    trainer = _trainer()
    trainer.train(_data(), num_epochs=2, eval_dataset=_data(8), per_device_batch_size=8,
                  gradient_accumulation_steps=2, create_scheduler_fn=FakeTimm)  # fmt: skip
    assert _calls(trainer) == [
        ("update", 5), ("update", 6), ("epoch", 2),
        ("update", 9), ("update", 10), ("epoch", 3),
    ]  # fmt: skip


def test_only_the_end_of_epoch_evaluation_steps_the_epoch() -> None:
    # Evaluations in the middle of an epoch (every update here) and a standalone
    # evaluate() leave the epoch schedule alone.
    trainer = _trainer(callbacks=[StepBasedEvaluationCallback(eval_every_n_steps=1)])
    trainer.train(_data(), num_epochs=2, eval_dataset=_data(8), per_device_batch_size=16,
                  create_scheduler_fn=FakeTimm)  # fmt: skip
    assert [c for c in _calls(trainer) if c[0] == "epoch"] == [("epoch", 2), ("epoch", 3)]
    trainer.evaluate(_data(8), per_device_batch_size=8)
    assert [c for c in _calls(trainer) if c[0] == "epoch"] == [("epoch", 2), ("epoch", 3)]


def test_a_resumed_run_continues_num_updates(tmp_path: Path) -> None:
    full = _trainer()
    full.train(_data(), num_epochs=2, per_device_batch_size=16, create_scheduler_fn=FakeTimm)
    cut = _trainer()  # stops after 3 of the 4 updates, in the middle of epoch 2
    cut.train(_data(), num_epochs=2, per_device_batch_size=16, max_num_train_steps=3,
              create_scheduler_fn=FakeTimm)  # fmt: skip
    cut.save_checkpoint(tmp_path / "cut.pt")
    resumed = _trainer()
    with pytest.warns(UserWarning, match=r"planned for 3 optimizer updates .* planned for 4"):
        resumed.train(_data(), num_epochs=2, per_device_batch_size=16,
                      resume_from=tmp_path / "cut.pt", create_scheduler_fn=FakeTimm)  # fmt: skip
    assert _calls(resumed) == _calls(full) == [
        ("update", 3), ("update", 4), ("update", 5), ("update", 6),
    ]  # fmt: skip
    assert resumed.num_updates == full.num_updates == 6
