"""A local manager's ``best_path`` names the file ``load(which="best")`` loads."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager, CorruptCheckpointError


def _three_saves(folder: Path) -> CheckpointManager:
    """Steps 1, 2, 3 with losses 0.1, 0.2, 0.9: step 1 is best, then step 2."""
    manager = CheckpointManager(folder, keep_last=None, monitor="loss", async_write=False)
    model = torch.nn.Linear(4, 2)
    for step, loss in ((1, 0.1), (2, 0.2), (3, 0.9)):
        manager.save({"model": model}, step=step, metrics={"loss": loss})
    return manager


def _truncate(path: Path) -> None:
    body = path.read_bytes()
    path.write_bytes(body[: len(body) // 2])


def test_best_path_skips_a_truncated_best_like_load_does(tmp_path: Path) -> None:
    manager = _three_saves(tmp_path)
    best = manager.best_path
    assert best is not None and best.name.endswith("step1.pt")
    _truncate(best)
    with pytest.warns(UserWarning, match="truncated"):
        loaded = manager.load({"model": torch.nn.Linear(4, 2)}, which="best")
    with pytest.warns(UserWarning, match=best.name):
        named = manager.best_path
    assert named == loaded.path
    assert named is not None and named.name.endswith("step2.pt")


def test_best_path_of_an_intact_folder_warns_nothing(tmp_path: Path) -> None:
    manager = _three_saves(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        best = manager.best_path
    assert best is not None and best.name.endswith("step1.pt")


def test_best_path_when_every_ranked_file_is_damaged_says_so(tmp_path: Path) -> None:
    manager = _three_saves(tmp_path)
    for info in manager.checkpoints():
        _truncate(info.path)
    with pytest.warns(UserWarning), pytest.raises(CorruptCheckpointError):
        manager.best_path  # noqa: B018
