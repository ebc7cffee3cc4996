"""Metric names are stored as strings: two keys that read the same as strings are refused,
never silently merged into one value."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager


def test_int_and_str_metric_keys_that_collide_are_refused(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2)
    with pytest.raises(ValueError, match=r"metrics 1 and '1' have the same name") as info:
        manager.save({"w": torch.zeros(1)}, step=1, metrics={1: 0.5, "1": 0.7})
    assert "rename" in str(info.value)
    assert manager.checkpoints() == []  # nothing half-saved


def test_distinct_non_str_metric_keys_are_stored_as_strings(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2)
    manager.save({"w": torch.zeros(1)}, step=1, metrics={1: 0.5, "loss": 0.7})
    (info,) = manager.checkpoints()
    assert info.metrics == {"1": 0.5, "loss": 0.7}
    assert manager.load(map_location="cpu").metrics == {"1": 0.5, "loss": 0.7}
