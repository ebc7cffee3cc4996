"""index.json stays strict JSON when a metric is NaN or infinite (a diverged loss)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from scramjet.checkpoint import CheckpointManager
from scramjet.checkpoint.records import INDEX, read_index


def _strict_load(path: Path) -> Any:
    """Parse like JavaScript's JSON.parse or jq: NaN and Infinity are not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{path.name} holds {name}, which is not valid JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def _save_all(directory: Path, losses: list[float], mode: str = "min") -> CheckpointManager:
    manager = CheckpointManager(
        directory, keep_last=None, monitor="loss", mode=mode, async_write=False, fsync=False
    )
    for step, loss in enumerate(losses):
        manager.save({"w": torch.zeros(2)}, step=step, metrics={"loss": loss})
    return manager


def test_index_with_nan_and_inf_metrics_is_strict_json(tmp_path: Path) -> None:
    _save_all(tmp_path, [0.5, math.nan, math.inf, -math.inf, 0.25])
    data = _strict_load(tmp_path / INDEX)
    stored = [c["metrics"]["loss"] for c in data["checkpoints"]]
    assert stored[0] == 0.5 and stored[4] == 0.25
    assert all(not isinstance(v, float) for v in stored[1:4])  # encoded, not bare NaN/Infinity


def test_nonfinite_metrics_read_back_and_nan_never_ranks_best(tmp_path: Path) -> None:
    _save_all(tmp_path, [0.5, math.nan, math.inf, 0.25])
    index = read_index(tmp_path)
    losses = [index[name].metrics["loss"] for name in sorted(index)]
    assert losses[0] == 0.5 and math.isnan(losses[1]) and losses[2] == math.inf
    # A fresh manager, as after a restart, ranks from what the index holds.
    fresh = CheckpointManager(tmp_path, monitor="loss", async_write=False, fsync=False)
    best = fresh.best_path
    assert best is not None and best.name.endswith("step3.pt")
    assert _strict_load(tmp_path / INDEX)["best"] == best.name


def test_max_mode_with_nan_keeps_a_finite_best(tmp_path: Path) -> None:
    _save_all(tmp_path, [math.nan, 0.7, math.nan], mode="max")
    data = _strict_load(tmp_path / INDEX)
    assert data["best"] is not None and data["best"].endswith("step1.pt")


def test_old_index_with_bare_nan_and_infinity_is_still_read(tmp_path: Path) -> None:
    # Indexes written before this fix hold the bare tokens Python's json module accepts.
    (tmp_path / INDEX).write_text(
        '{"checkpoints": [{"epoch": null, "file": "ckpt-1-step0.pt", "metrics": '
        '{"loss": NaN}, "seq": 1, "step": 0}, {"epoch": 1, "file": "ckpt-2-step5.pt", '
        '"metrics": {"loss": Infinity, "acc": -Infinity}, "seq": 2, "step": 5}], '
        '"format": 1, "mode": "min", "monitor": "loss"}',
        encoding="utf-8",
    )
    index = read_index(tmp_path)
    assert math.isnan(index["ckpt-1-step0.pt"].metrics["loss"])
    assert index["ckpt-2-step5.pt"].metrics == {"loss": math.inf, "acc": -math.inf}
