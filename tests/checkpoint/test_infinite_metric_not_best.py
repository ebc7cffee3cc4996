"""A diverged metric (-inf loss, +inf score) is never the best checkpoint."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager


@pytest.mark.parametrize(("mode", "diverged"), [("min", -math.inf), ("max", math.inf)])
def test_an_infinite_metric_never_ranks_best(tmp_path: Path, mode: str, diverged: float) -> None:
    manager = CheckpointManager(
        tmp_path, keep_last=1, keep_best=1, monitor="loss", mode=mode, async_write=False
    )
    good = 0.25 if mode == "min" else 0.75
    for step, value in enumerate([0.5, good, diverged, 0.5]):
        manager.save({"w": torch.full((2,), float(step))}, step=step, metrics={"loss": value})
    best = manager.best_path
    assert best is not None and best.name.endswith("step1.pt"), best
    # keep_best kept the good weights, not the diverged ones
    assert sorted(p.name.split("-")[-1] for p in tmp_path.glob("ckpt-*.pt")) == [
        "step1.pt",
        "step3.pt",
    ]
