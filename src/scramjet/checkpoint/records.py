"""What a checkpoint folder records about its checkpoints, without their tensors.

:class:`CheckpointInfo` describes one checkpoint file, :class:`LoadResult` what a load
restored. ``index.json`` caches every checkpoint's step, epoch and metrics, and the
ranking (monitor and mode) its manager used: :func:`write_index` replaces it atomically,
:func:`read_index` and :func:`read_ranking` read it back and treat a missing or damaged
index as empty (the manager rebuilds it from the files themselves).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scramjet.runtime.files import atomic_write

INDEX = "index.json"
NAME_RE = re.compile(r"^ckpt-(\d+)-step(\d+)\.pt$")


@dataclass(frozen=True)
class CheckpointInfo:
    """What is known about one checkpoint without loading its tensors.

    Attributes:
        path: The checkpoint file.
        seq: Sequence number (grows by one with every save, across restarts).
        step: Training step passed to :meth:`CheckpointManager.save`.
        epoch: Epoch passed to :meth:`CheckpointManager.save`, if any.
        metrics: Metrics passed to :meth:`CheckpointManager.save`.
    """

    path: Path
    seq: int
    step: int
    epoch: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class LoadResult:
    """What :meth:`CheckpointManager.load` restored and what it hands back.

    Attributes:
        path: The file that was loaded (after any fallback).
        step: Training step stored in the checkpoint.
        epoch: Epoch stored in the checkpoint, if any.
        metrics: Metrics stored in the checkpoint.
        values: Entries that were not restored in place: plain values (numbers, strings,
            tensors, numpy arrays, containers of these) and state dicts of entries that
            the ``state`` argument did not name.
        missing_keys: Per entry, keys the object expects but the checkpoint lacks.
        unexpected_keys: Per entry, keys the checkpoint has but the object does not expect.
        mismatched_keys: Per entry, keys whose tensor shapes differ (``"key: saved -> model"``).
    """

    path: Path
    step: int
    epoch: int | None
    metrics: dict[str, float]
    values: dict[str, Any] = field(default_factory=dict, repr=False)  # tensors: too long to print
    missing_keys: dict[str, list[str]] = field(default_factory=dict)
    unexpected_keys: dict[str, list[str]] = field(default_factory=dict)
    mismatched_keys: dict[str, list[str]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """True when nothing was missing, unexpected or mismatched."""
        return not (self.missing_keys or self.unexpected_keys or self.mismatched_keys)

    def record_skipped(self, name: str, skipped: tuple[list[str], ...]) -> None:
        """Keep entry ``name``'s skipped keys (missing, unexpected, mismatched), if any."""
        reports = (self.missing_keys, self.unexpected_keys, self.mismatched_keys)
        for report, keys in zip(reports, skipped, strict=True):
            if keys:
                report[name] = keys


def ranked_best(found: list[CheckpointInfo], key: str | None, mode: str) -> list[CheckpointInfo]:
    """``found`` with metric ``key``, best first (``mode`` "min" or "max"); NaN never ranks."""
    if not key:
        return []
    scored = [c for c in found if key in c.metrics and not math.isnan(c.metrics[key])]
    sign = 1.0 if mode == "min" else -1.0
    # Ties go to the earlier checkpoint: a later one must be strictly better.
    return sorted(scored, key=lambda c: (sign * c.metrics[key], c.seq))


def write_index(
    directory: Path, kept: list[CheckpointInfo], *, monitor: str | None, mode: str, version: int
) -> None:
    """Replace ``directory``'s index with ``kept`` (oldest first) and the ranking rule."""
    best = ranked_best(kept, monitor, mode)
    data = {
        "format": version,
        "latest": kept[-1].path.name if kept else None,
        "best": best[0].path.name if best else None,
        "monitor": monitor,
        "mode": mode,
        "checkpoints": [
            {"file": c.path.name, "seq": c.seq, "step": c.step, "epoch": c.epoch}
            | {"metrics": c.metrics}
            for c in kept
        ],
    }
    text = json.dumps(data, indent=1, sort_keys=True).encode("utf-8")
    # The index is a cache rebuilt from the files after a crash: atomic, but no fsync.
    atomic_write(directory / INDEX, lambda file: file.write(text), fsync=False)


def _load_index(directory: Path) -> dict[str, Any]:
    data = json.loads((directory / INDEX).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("the index is not a JSON object")
    return data


def read_index(directory: Path) -> dict[str, CheckpointInfo]:
    """The index's entries by file name; empty when the index is missing or unreadable."""
    try:
        return {
            e["file"]: CheckpointInfo(
                path=directory / e["file"],
                seq=int(e["seq"]),
                step=int(e["step"]),
                epoch=e.get("epoch"),
                metrics={str(k): float(v) for k, v in (e.get("metrics") or {}).items()},
            )
            for e in _load_index(directory).get("checkpoints", [])
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}  # a missing or unreadable index is rebuilt from the files themselves


def read_ranking(directory: Path) -> tuple[str | None, str | None]:
    """``(monitor, mode)`` the index records; ``(None, None)`` when it records none."""
    try:
        data = _load_index(directory)
    except (OSError, ValueError):
        return None, None
    monitor, mode = data.get("monitor"), data.get("mode")
    ok = isinstance(monitor, str) and bool(monitor) and mode in ("min", "max")
    return (monitor, mode) if ok else (None, None)
