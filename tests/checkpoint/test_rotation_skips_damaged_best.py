"""Rotation never keeps a damaged checkpoint as one of the ``keep_best`` best in place of
a readable one: the readable runner-up survives and ``load("best")`` finds it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager


def _flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage", [_flip_bytes, _truncate])
def test_damaged_best_does_not_cost_the_readable_runner_up(tmp_path: Path, damage: object) -> None:
    manager = CheckpointManager(tmp_path, keep_last=1, keep_best=1, monitor="loss", mode="min")
    first = manager.save({"w": torch.full((64,), 1.0)}, step=1, metrics={"loss": 0.1})
    manager.save({"w": torch.full((64,), 2.0)}, step=2, metrics={"loss": 0.2})
    manager.wait()
    damage(first)  # type: ignore[operator]
    with pytest.warns(UserWarning, match=r"ckpt-000001-step1\.pt.*cannot be read"):
        manager.save({"w": torch.full((64,), 3.0)}, step=3, metrics={"loss": 0.3})
        manager.wait()  # rotation may run in the background
    steps = [c.step for c in manager.checkpoints()]
    assert 2 in steps, f"the best readable checkpoint (step 2) was rotated away: {steps}"
    best = manager.best_path
    assert best is not None and best.name == "ckpt-000002-step2.pt"
    saved = torch.load(best, weights_only=True)
    assert torch.equal(saved["state"]["w"], torch.full((64,), 2.0))


def test_readable_best_is_kept_without_warning(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=1, keep_best=2, monitor="acc", mode="max")
    for step, acc in enumerate([0.5, 0.9, 0.1, 0.8, 0.2], start=1):
        manager.save({"w": torch.full((8,), float(step))}, step=step, metrics={"acc": acc})
    assert [c.step for c in manager.checkpoints()] == [2, 4, 5]
