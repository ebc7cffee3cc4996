"""A checkpoint folder deleted while a run saves into it (a cleanup script, a user): the
next save creates it again with one warning, and a write the deletion broke says so
instead of claiming that the earlier checkpoints are intact."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager, CheckpointWriteError


def test_a_save_after_the_folder_was_removed_creates_it_again(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    manager = CheckpointManager(folder, async_write=False, keep_last=2)
    manager.save({"w": torch.ones(3)}, step=1)
    manager.save({"w": torch.ones(3)}, step=2)
    shutil.rmtree(folder)
    with pytest.warns(RuntimeWarning, match=r"was removed while in use, with the 2 checkpoint"):
        path = manager.save({"w": torch.full((3,), 3.0)}, step=3)
    assert path.parent == folder and path.is_file()
    assert [c.step for c in manager.checkpoints()] == [3]
    assert torch.equal(manager.load().values["w"], torch.full((3,), 3.0))
    manager.save({"w": torch.ones(3)}, step=4)  # warned once: the folder is there again
    assert [c.step for c in manager.checkpoints()] == [3, 4]
    manager.close()


def test_a_background_write_broken_by_the_removal_says_what_happened(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    manager = CheckpointManager(folder, async_write=True)
    manager.save({"w": torch.ones(3)}, step=1)
    manager.wait()
    manager.save({"w": torch.zeros(64, 1024, 1024)}, step=2)  # 256 MB: still being written
    shutil.rmtree(folder)
    with pytest.raises(CheckpointWriteError) as info:
        manager.wait()
    text = str(info.value)
    assert "was removed" in text and "intact" not in text, text
    with pytest.warns(RuntimeWarning, match="was removed while in use"):
        manager.save({"w": torch.ones(3)}, step=3)
    manager.wait()
    assert [c.step for c in manager.checkpoints()] == [3]
    manager.close()
