"""Epochs count from 0 like steps: a negative one is refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager, write_checkpoint


@pytest.mark.parametrize("epoch", [-2, -1])
def test_manager_refuses_a_negative_epoch_and_writes_nothing(tmp_path: Path, epoch: int) -> None:
    with CheckpointManager(tmp_path, async_write=False) as manager:
        with pytest.raises(
            ValueError,
            match=rf"epoch must be a non-negative int or None, got int: {epoch}; epochs count from 0",
        ):
            manager.save({"model": torch.nn.Linear(2, 2)}, step=3, epoch=epoch)
        assert manager.checkpoints() == []
    assert not list(tmp_path.glob("ckpt-*.pt"))


def test_write_checkpoint_refuses_a_negative_epoch(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"epochs count from 0"):
        write_checkpoint(tmp_path / "one.pt", {"w": torch.ones(2)}, step=0, epoch=-2)
    assert not (tmp_path / "one.pt").exists()


def test_epoch_zero_and_none_are_kept(tmp_path: Path) -> None:
    with CheckpointManager(tmp_path, async_write=False) as manager:
        manager.save({"w": torch.ones(1)}, step=0, epoch=0)
        manager.save({"w": torch.ones(1)}, step=1)
        assert [info.epoch for info in manager.checkpoints()] == [0, None]
