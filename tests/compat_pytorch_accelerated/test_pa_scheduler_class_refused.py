"""pytorch-accelerated's load_checkpoint refuses a scheduler state saved from another
scheduler class, as scramjet's own loading does: the file records each state's class, so
also a pair with the same keys (LambdaLR and MultiplicativeLR) is told apart."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet.checkpoint import CheckpointMismatchError
from scramjet.compat.pytorch_accelerated import Trainer


def _trainer(make_scheduler) -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(model, nn.MSELoss(), optimizer, callbacks=())
    data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    trainer.train(data, num_epochs=1, per_device_batch_size=4, create_scheduler_fn=make_scheduler)
    return trainer


def test_a_scheduler_of_another_class_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.pt"
    step = _trainer(lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.1))
    step.save_checkpoint(path)
    other = _trainer(lambda opt: torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.99))
    with pytest.raises(
        CheckpointMismatchError, match=r"StepLR.*ExponentialLR|ExponentialLR.*StepLR"
    ):
        other.load_checkpoint(path)
    assert other.scheduler.gamma == 0.99
    same = _trainer(lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5))
    same.load_checkpoint(path)  # the same class loads, its settings the saved ones
    assert same.scheduler.gamma == 0.1 and same.scheduler.step_size == 10


def test_schedulers_with_the_same_keys_are_told_apart(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.pt"
    _trainer(lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0)).save_checkpoint(
        path
    )
    other = _trainer(lambda opt: torch.optim.lr_scheduler.MultiplicativeLR(opt, lambda e: 0.9))
    assert set(other.scheduler.state_dict()) == set(
        torch.load(path, weights_only=False)["scheduler_state_dict"]
    )
    with pytest.raises(CheckpointMismatchError, match="LambdaLR"):
        other.load_checkpoint(path)


def test_a_checkpoint_kwarg_named_classes_stays_the_users(tmp_path: Path) -> None:
    # a classifier's label list under the peer's usual name: the file's top-level "classes"
    # held scramjet's record of the state classes instead
    path = tmp_path / "ckpt.pt"
    trainer = _trainer(lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=10))
    trainer.save_checkpoint(path, checkpoint_kwargs={"classes": ["cat", "dog"]})
    assert torch.load(path, weights_only=True)["classes"] == ["cat", "dog"]
    assert trainer.load_checkpoint(path)["classes"] == ["cat", "dog"]
    plain = tmp_path / "plain.pt"
    trainer.save_checkpoint(plain)
    assert "classes" not in trainer.load_checkpoint(plain)
