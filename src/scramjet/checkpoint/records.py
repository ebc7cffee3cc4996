"""What a checkpoint folder records about its checkpoints, without their tensors.

:class:`CheckpointInfo` describes one checkpoint file, :class:`LoadResult` what a load
restored, :func:`load_training_object` whether a saved optimizer or scheduler fits the
one it is loaded into. ``index.json`` caches every checkpoint's step, epoch and metrics, and the
ranking (monitor and mode) its manager used: :func:`write_index` replaces it atomically,
:func:`read_index` and :func:`read_ranking` read it back and treat a missing or damaged
index as empty (the manager rebuilds it from the files themselves). A manager's index
names as ``"best"`` only a checkpoint whose checksum it checked: a damaged best (truncated,
bytes flipped on disk) gives its place to the best intact one at the next save.

The index is strict JSON, readable by any JSON parser: a metric that is NaN or infinite (a
diverged loss) is written as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``. Both
these strings and the bare ``NaN``/``Infinity`` tokens of older indexes read back as floats.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from scramjet.checkpoint.payload import CheckpointMismatchError, CorruptCheckpointError
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


def none_readable(tried: list[Path], errors: list[Any]) -> CorruptCheckpointError:
    """The error when none of the checkpoints ``tried`` (newest first) can be read."""
    folders = sorted({str(path.parent) for path in tried})
    where = folders[0] if len(folders) == 1 else ", ".join(folders)
    return CorruptCheckpointError(
        tried[0],
        f"no readable checkpoint left: {'; '.join(str(e) for e in errors)}. All "
        f"{len(tried)} checkpoint(s) tried are damaged. Put back a good copy of one of them "
        f"(from a backup or the remote store), or move them out of {where!r} to start the "
        f"run afresh (a resume never starts from step 0 over saved checkpoints by itself).",
    )


_NEW_OPTIMIZER = (
    "Resume with the optimizer and scheduler the checkpoint was saved with; to train the "
    "saved weights with a new optimizer, load them with trainer.load_checkpoint(path, "
    "load_optimizer=False, load_training_state=False) (or CheckpointManager.load("
    "{'model': model})) and call train() without resume_from."
)


def load_training_object(
    name: str,
    obj: Any,
    saved: Any,
    strict: bool,
    path: Path,
    *,
    check_only: bool = False,
    saved_class: str | None = None,
) -> list[str]:
    """Load entry ``name`` of ``path`` into ``obj``; returns the keys it could not use.

    An optimizer or a learning-rate scheduler saved from another kind than ``obj`` (SGD's
    checkpoint into AdamW, a cosine schedule into OneCycleLR) is refused: torch would pour
    the saved hyperparameters into ``obj`` and fail at its next step, or silently follow
    the other schedule. ``saved_class`` is the class name the file records for the entry
    (see :func:`recorded_classes`; None for files that record none). With ``strict`` that
    is a :class:`CheckpointMismatchError`; otherwise ``obj`` is left as it was and the keys
    it lacks (or ``"<whole entry>"``) are returned. ``check_only`` raises or returns the
    same without loading anything.
    """
    refused = _training_problem(obj, saved, saved_class) if isinstance(saved, Mapping) else None
    if refused is not None:
        problem, keys, advice = refused
        return _refuse(name, problem, keys or ["<whole entry>"], strict, path, advice=advice)
    if not check_only:
        obj.load_state_dict(dict(saved) if isinstance(obj, torch.optim.Optimizer) else saved)
    return []


def recorded_classes(payload: Mapping[str, Any]) -> dict[str, str]:
    """The class name of each entry a checkpoint saved through ``state_dict()``, as its
    ``"classes"`` field records them (empty for files written before it did)."""
    kinds = payload.get("classes")
    if not isinstance(kinds, dict):
        return {}
    return {k: v for k, v in kinds.items() if isinstance(k, str) and isinstance(v, str)}


def _training_problem(
    obj: Any, saved: Mapping[str, Any], saved_class: str | None
) -> tuple[str, list[str], str] | None:
    """Why ``saved`` does not fit ``obj`` (the problem, the keys concerned, advice), if so."""
    if isinstance(obj, torch.optim.Optimizer):
        return _optimizer_problem(obj, saved)
    if isinstance(obj, torch.amp.GradScaler) and not saved:
        keys = list(obj.state_dict())
        if keys:  # an enabled scaler; torch raises a RuntimeError even for strict=False
            problem = (
                f"holds the empty state of a disabled GradScaler; the GradScaler it is loaded "
                f"into is enabled. Pass strict=False to keep its current state (scale "
                f"{obj.get_scale()}), or load into GradScaler(enabled=False)"
            )
            return problem, keys, ""
    if isinstance(obj, torch.optim.lr_scheduler.LRScheduler):
        return _scheduler_problem(obj, saved, saved_class)
    return None


# Settings schedulers of older torch versions held and newer ones dropped.
_DROPPED_SCHEDULER_KEYS = frozenset({"verbose"})


def _scheduler_problem(
    obj: torch.optim.lr_scheduler.LRScheduler, saved: Mapping[str, Any], saved_class: str | None
) -> tuple[str, list[str], str] | None:
    own = {k for k in obj.state_dict() if not k.startswith("_")}
    held = {str(k) for k in saved if not str(k).startswith("_")}
    foreign = sorted(held - own - _DROPPED_SCHEDULER_KEYS)
    target = type(obj).__name__
    # The class itself where the file records it (a subclass of the saved class takes its
    # state); otherwise the keys: the state of an older torch's version of the same class
    # may lack keys, but never holds settings the class does not define.
    if saved_class is not None:
        if saved_class in {c.__qualname__ for c in type(obj).__mro__}:
            return None
        problem = f"was saved from {saved_class}, not from the {target} it is loaded into"
    elif foreign:
        problem = f"was saved from another kind of scheduler than the {target} it is loaded into"
    else:
        return None
    if foreign:
        problem += f": it holds {foreign}, which {target} does not define"
    if own - held:
        problem += f"{' and' if foreign else ': it'} lacks {sorted(own - held)}"
    problem += (
        f"; torch would pour its settings into the {target}, which would then follow "
        "another schedule than the one it was built with"
    )
    return problem, sorted(own - held), " " + _NEW_OPTIMIZER


def renamed_warning(path: Path, payload: Mapping[str, Any]) -> str | None:
    """Why the checkpoint ``path`` chosen by its name's sequence number and step holds
    another one (it was renamed or copied there), or None when they agree."""
    match = NAME_RE.match(path.name)
    seq, step = payload.get("seq"), payload.get("step")
    if match is None or not isinstance(seq, int) or (int(match[1]), int(match[2])) == (seq, step):
        return None
    return (
        f"checkpoint {str(path)!r} was chosen by its name (sequence {int(match[1])}, step "
        f"{int(match[2])}) but holds sequence {seq}, step {step}: it was renamed or copied "
        f"there. It is loaded as it is (training goes on from step {step}); if it is not "
        f"the checkpoint to resume from, move it out of {str(path.parent)!r} and load again."
    )


def _optimizer_problem(
    opt: torch.optim.Optimizer, saved: Mapping[str, Any]
) -> tuple[str, list[str], str] | None:
    groups = saved.get("param_groups")
    if not (isinstance(groups, list) and all(isinstance(g, Mapping) for g in groups)):
        return None  # malformed: torch's load_state_dict says what is wrong
    held = [len(g.get("params", ())) for g in groups]
    own = [len(g["params"]) for g in opt.param_groups]
    if held != own:
        problem = (
            f"holds {_groups(held)} of sizes {held}; the {type(opt).__name__} it is "
            f"loaded into has {_groups(own)} of sizes {own}"
        )
        return problem, ["param_groups"], " " + _NEW_OPTIMIZER
    # Loading replaces the groups by the saved ones: each must have every hyperparameter.
    lacking = sorted({k for g in groups for k in opt.defaults if k not in g})
    if not lacking:
        return None
    problem = (
        f"was saved from another kind of optimizer than the {type(opt).__name__} it is "
        f"loaded into: its parameter groups lack {lacking}"
    )
    return problem, lacking, " " + _NEW_OPTIMIZER


def _groups(sizes: list[int]) -> str:
    return f"{len(sizes)} parameter group{'' if len(sizes) == 1 else 's'}"


def _refuse(
    name: str, problem: str, keys: list[str], strict: bool, path: Path, advice: str
) -> list[str]:
    if strict:
        raise CheckpointMismatchError(
            f"entry {name!r} of checkpoint {str(path)!r} {problem}.{advice}"
        )
    return keys


def ranked_best(found: list[CheckpointInfo], key: str | None, mode: str) -> list[CheckpointInfo]:
    """``found`` with metric ``key``, best first (``mode`` "min" or "max"). A value that is
    NaN or infinite never ranks: a diverged loss of -inf is not the best weights."""
    if not key:
        return []
    scored = [c for c in found if key in c.metrics and math.isfinite(c.metrics[key])]
    sign = 1.0 if mode == "min" else -1.0
    # Ties go to the earlier checkpoint: a later one must be strictly better.
    return sorted(scored, key=lambda c: (sign * c.metrics[key], c.seq))


def _metric_json(value: float) -> float | str:
    """``value`` as strict JSON allows it: a non-finite float becomes its name, a string."""
    value = float(value)
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def write_index(
    directory: Path,
    kept: list[CheckpointInfo],
    *,
    monitor: str | None,
    mode: str,
    version: int,
    readable: Callable[[CheckpointInfo], bool] | None = None,
) -> None:
    """Replace ``directory``'s index with ``kept`` (oldest first) and the ranking rule.

    ``"best"`` names the best of ``kept`` by ``monitor`` for which ``readable`` is true
    (checked best first, stopping at the first readable one; without ``readable`` the
    best by ``monitor``), or null when none is."""
    ranked = ranked_best(kept, monitor, mode)
    best = next((c for c in ranked if readable is None or readable(c)), None)
    data = {
        "format": version,
        "latest": kept[-1].path.name if kept else None,
        "best": best.path.name if best is not None else None,
        "monitor": monitor,
        "mode": mode,
        "checkpoints": [
            {"file": c.path.name, "seq": c.seq, "step": c.step, "epoch": c.epoch}
            | {"metrics": {k: _metric_json(v) for k, v in c.metrics.items()}}
            for c in kept
        ],
    }
    # allow_nan=False: a non-finite value left anywhere fails here, never in a reader.
    text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False).encode("utf-8")
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
                # float() reads the "NaN"/"Infinity"/"-Infinity" strings write_index stores.
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
