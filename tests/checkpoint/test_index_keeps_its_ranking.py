"""A manager made without monitor= keeps the ranking rule its folder's index records."""

from __future__ import annotations

from pathlib import Path

import torch

from scramjet.checkpoint import CheckpointManager


def test_saving_without_a_monitor_keeps_which_best_working(tmp_path: Path) -> None:
    first = CheckpointManager(
        tmp_path, keep_last=None, monitor="acc", mode="max", async_write=False
    )
    for step, acc in enumerate([0.5, 0.9, 0.6]):
        first.save({"w": torch.full((1,), float(step))}, step=step, metrics={"acc": acc})
    # later, a script of the same run (or a copied folder) opens it without monitor=
    later = CheckpointManager(tmp_path, keep_last=None, async_write=False)
    later.save({"w": torch.full((1,), 3.0)}, step=3, metrics={"acc": 0.7})
    # before: the index was rewritten with monitor None, and which='best' had nothing to rank by
    reread = CheckpointManager(tmp_path, async_write=False)
    best = reread.best_path
    assert best is not None and best.name.endswith("step1.pt"), best
    loaded = reread.load({"w": None}, which="best")
    assert float(loaded.values["w"]) == 1.0
