"""Checkpoints that survive crashes, restarts and rotation.

:class:`CheckpointManager` writes one file per checkpoint into a directory:

``ckpt-<seq>-step<step>.pt``
    ``seq`` is a sequence number that only grows (it is recovered from the directory
    when a new process starts, so a restart never overwrites an earlier file) and
    ``step`` is the training step. *Latest* means the highest ``seq``, never the newest
    modification time.
``index.json``
    Step, epoch and metrics of every checkpoint, replaced atomically after each save.
    It is only a cache: the directory listing decides which checkpoints exist, and a
    checkpoint missing from the index has its metadata read back from the file itself.

Writes go to a temporary file in the same directory (fsync-ed), then ``os.replace``
and a directory fsync: a process killed mid-save leaves at most a ``.tmp-*`` file,
ignored by readers and removed by the next save. Reads use
``torch.load(weights_only=True)``. One process writes to a directory (rank 0 in a
distributed run); every rank may read.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from scramjet.runtime.files import TMP_PREFIX, atomic_write

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "CheckpointMismatchError",
    "CorruptCheckpointError",
    "LoadResult",
    "read_checkpoint",
    "write_checkpoint",
]

FORMAT_VERSION = 1
_MARKER = "scramjet_checkpoint"
_NDARRAY_TAG = "__scramjet_ndarray__"
_INDEX = "index.json"

_NAME_RE = re.compile(r"^ckpt-(\d+)-step(\d+)\.pt$")
_MAX_LISTED_KEYS = 20
_PRIMITIVES: tuple[type, ...] = (bool, int, float, complex, str, bytes)


class CheckpointError(RuntimeError):
    """Base class of the errors raised while reading checkpoints."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file cannot be read (truncated, damaged, or not a scramjet checkpoint)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        super().__init__(f"checkpoint {str(path)!r} cannot be read: {reason}")


class CheckpointMismatchError(CheckpointError, ValueError):
    """The checkpoint does not fit the objects it is loaded into (``strict=True``)."""


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
    values: dict[str, Any] = field(default_factory=dict)
    missing_keys: dict[str, list[str]] = field(default_factory=dict)
    unexpected_keys: dict[str, list[str]] = field(default_factory=dict)
    mismatched_keys: dict[str, list[str]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """True when nothing was missing, unexpected or mismatched."""
        return not (self.missing_keys or self.unexpected_keys or self.mismatched_keys)


# --------------------------------------------------------------------------- files


def _write_json(path: Path, data: Any) -> None:
    # The index is a cache rebuilt from the files after a crash: atomic, but no fsync.
    text = json.dumps(data, indent=1, sort_keys=True).encode("utf-8")
    atomic_write(path, lambda file: file.write(text), fsync=False)


def _meta(info: CheckpointInfo) -> dict[str, Any]:
    return {"seq": info.seq, "step": info.step, "epoch": info.epoch, "metrics": info.metrics}


def _unlink_all(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


# --------------------------------------------------------------------------- value conversion


def _to_storable(value: Any, where: str) -> Any:
    """Convert ``value`` into types that ``torch.load(weights_only=True)`` accepts."""
    if value is None or type(value) in _PRIMITIVES:
        return value
    if isinstance(value, np.generic):  # before float: np.float64 subclasses float
        return value.item()
    for base in _PRIMITIVES:  # IntEnum, str subclasses, ...: store the plain value
        if isinstance(value, base):
            return base(value)
    if isinstance(value, torch.Tensor | torch.dtype | torch.device):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(
                f"{where}: numpy arrays of dtype=object cannot be stored safely; "
                "convert it to a numeric array or a list first"
            )
        return {_NDARRAY_TAG: torch.from_numpy(np.ascontiguousarray(value))}
    if isinstance(value, Mapping):
        return {k: _to_storable(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_to_storable(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, list):
            return items
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(items)
        return items if hasattr(value, "_fields") else type(value)(items)
    raise TypeError(
        f"{where}: cannot store a value of type {type(value).__qualname__}. Expected an object "
        "with state_dict()/load_state_dict(), a tensor, a numpy array, a number, a string, "
        "or lists/tuples/dicts of these. Convert it (e.g. to a dict) before saving."
    )


def _from_storable(value: Any, copy: bool = False) -> Any:
    """Undo :func:`_to_storable`; ``copy`` clones tensors (to detach them from a mmap)."""
    if isinstance(value, torch.Tensor):
        return value.clone() if copy else value
    if isinstance(value, dict):
        if len(value) == 1 and _NDARRAY_TAG in value:
            return _from_storable(value[_NDARRAY_TAG], copy).numpy()
        return {k: _from_storable(v, copy) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_storable(v, copy) for v in value]
    if isinstance(value, tuple):
        return tuple(_from_storable(v, copy) for v in value)
    return value


def _unwrap(obj: Any) -> Any:
    """Strip DDP/DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``) wrappers."""
    while True:
        if isinstance(obj, nn.parallel.DistributedDataParallel | nn.DataParallel):
            obj = obj.module
        elif isinstance(obj, nn.Module) and isinstance(getattr(obj, "_orig_mod", None), nn.Module):
            obj = obj._orig_mod
        else:
            return obj


def _is_stateful(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def _clean_metrics(metrics: Mapping[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in (metrics or {}).items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        try:
            out[str(name)] = float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"metric {name!r} must be a number (or a one-element tensor), got "
                f"{type(value).__qualname__}: {value!r}"
            ) from None
    return out


def _format_keys(keys: list[str]) -> str:
    shown = ", ".join(keys[:_MAX_LISTED_KEYS])
    more = len(keys) - _MAX_LISTED_KEYS
    return shown + (f", ... ({more} more)" if more > 0 else "")


# --------------------------------------------------------------------------- module loading


def _match_module_state(
    module: nn.Module, saved: Mapping[str, Any], scope: str | None
) -> tuple[dict[str, Any], list[str], list[str], list[str]]:
    """Pick the saved entries that fit ``module``; report missing/unexpected/mismatched keys."""
    own = module.state_dict()
    if scope:
        prefix = scope.rstrip(".") + "."
        own = {k: v for k, v in own.items() if k.startswith(prefix)}
        saved = {k: v for k, v in saved.items() if k.startswith(prefix)}
    usable: dict[str, Any] = {}
    mismatched: list[str] = []
    for key, value in saved.items():
        if key not in own:
            continue
        target = own[key]
        tensors = isinstance(value, torch.Tensor) and isinstance(target, torch.Tensor)
        if tensors and value.shape != target.shape:
            mismatched.append(f"{key}: {tuple(value.shape)} -> {tuple(target.shape)}")
            continue
        usable[key] = value
    missing = [k for k in own if k not in saved]
    unexpected = [k for k in saved if k not in own]
    return usable, missing, unexpected, mismatched


def _load_module(
    name: str, module: nn.Module, saved: Any, scope: str | None, strict: bool, result: LoadResult
) -> None:
    if not isinstance(saved, Mapping):
        raise CheckpointMismatchError(
            f"entry {name!r} of {str(result.path)!r} holds a {type(saved).__qualname__}, "
            "not a module state dict"
        )
    usable, missing, unexpected, mismatched = _match_module_state(module, saved, scope)
    if scope and not usable and not mismatched:
        prefixes = sorted({k.split(".", 1)[0] for k in saved})
        raise CheckpointMismatchError(
            f"entry {name!r} of {str(result.path)!r} has no keys under scope {scope!r}; "
            f"top-level prefixes in the checkpoint: {_format_keys(prefixes)}"
        )
    if strict and (missing or unexpected or mismatched):
        lines = [f"checkpoint {str(result.path)!r} does not fit entry {name!r}:"]
        for label, keys in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("shape mismatches", mismatched),
        ):
            if keys:
                lines.append(f"  {label} ({len(keys)}): {_format_keys(keys)}")
        lines.append(
            "  Load the checkpoint into the model it was saved from, or pass strict=False "
            "to load the matching keys only (or scope='prefix' for one submodule)."
        )
        raise CheckpointMismatchError("\n".join(lines))
    module.load_state_dict(usable, strict=False)
    for report, keys in (
        (result.missing_keys, missing),
        (result.unexpected_keys, unexpected),
        (result.mismatched_keys, mismatched),
    ):
        if keys:
            report[name] = keys


# --------------------------------------------------------------------------- the manager


class CheckpointManager:
    """Save, rotate and restore training checkpoints in one directory.

    Args:
        directory: Folder of the checkpoints; created if missing.
        keep_last: How many of the most recent checkpoints to keep (``None`` keeps all).
        keep_best: How many best checkpoints by ``monitor`` to keep in addition.
        monitor: Metric name that ranks checkpoints for ``keep_best`` and ``which="best"``.
        mode: ``"min"`` if a lower ``monitor`` is better, ``"max"`` if higher is better.
        fsync: Flush files and the directory to disk on every save (keep it on unless the
            directory is on storage where durability does not matter, e.g. tmpfs).

    Only one process may write into ``directory`` (in a distributed run, call
    :meth:`save` on rank 0 only, e.g. ``if is_main_process(): manager.save(...)``);
    every rank may call :meth:`load`.

    Example:
        >>> import tempfile, torch
        >>> model = torch.nn.Linear(2, 1)
        >>> manager = CheckpointManager(tempfile.mkdtemp(), keep_last=2)
        >>> path = manager.save({"model": model, "note": "hello"}, step=10, epoch=1)
        >>> result = manager.load({"model": model})
        >>> result.step, result.values["note"]
        (10, 'hello')
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep_last: int | None = 3,
        keep_best: int = 0,
        monitor: str | None = None,
        mode: Literal["min", "max"] = "min",
        fsync: bool = True,
    ) -> None:
        if keep_last is not None and (not isinstance(keep_last, int) or keep_last < 1):
            raise ValueError(
                f"keep_last must be a positive int or None (keep all), got {keep_last!r}; "
                "the latest checkpoint is always kept so that training can resume"
            )
        if not isinstance(keep_best, int) or keep_best < 0:
            raise ValueError(f"keep_best must be an int >= 0, got {keep_best!r}")
        if keep_best and not monitor:
            raise ValueError(
                f"keep_best={keep_best} needs monitor='<metric name>' to rank checkpoints"
            )
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self.keep_best = keep_best
        self.monitor = monitor
        self.mode = mode
        self.fsync = fsync
        self._meta_cache: dict[str, CheckpointInfo] = {}
        self._deleter: threading.Thread | None = None
        self.directory.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return (
            f"CheckpointManager({str(self.directory)!r}, keep_last={self.keep_last}, "
            f"keep_best={self.keep_best}, monitor={self.monitor!r}, mode={self.mode!r})"
        )

    # ----------------------------------------------------------------- listing

    def checkpoints(self) -> list[CheckpointInfo]:
        """All checkpoints in the directory, oldest (lowest ``seq``) first.

        Returns:
            One :class:`CheckpointInfo` per checkpoint file found by a directory scan.
        """
        self.wait()
        index = self._read_index()
        found: list[CheckpointInfo] = []
        for entry in os.scandir(self.directory):
            match = _NAME_RE.match(entry.name)
            if match is None or not entry.is_file():
                continue
            info = self._meta_cache.get(entry.name) or index.get(entry.name)
            if info is None:
                info = self._read_meta(Path(entry.path), int(match[1]), int(match[2]))
            self._meta_cache[entry.name] = info
            found.append(info)
        return sorted(found, key=lambda info: info.seq)

    @property
    def latest_path(self) -> Path | None:
        """The most recently saved checkpoint (highest ``seq``), or None if there is none."""
        found = self.checkpoints()
        return found[-1].path if found else None

    @property
    def best_path(self) -> Path | None:
        """The checkpoint with the best ``monitor`` value, or None if none has that metric."""
        ranked = self._ranked_best(self.checkpoints())
        return ranked[0].path if ranked else None

    def _ranked_best(self, found: list[CheckpointInfo]) -> list[CheckpointInfo]:
        if not self.monitor:
            return []
        key = self.monitor
        scored = [c for c in found if key in c.metrics and not math.isnan(c.metrics[key])]
        sign = 1.0 if self.mode == "min" else -1.0
        # Ties go to the earlier checkpoint: a later one must be strictly better.
        return sorted(scored, key=lambda c: (sign * c.metrics[key], c.seq))

    # ----------------------------------------------------------------- saving

    def save(
        self,
        state: Mapping[str, Any],
        *,
        step: int,
        epoch: int | None = None,
        metrics: Mapping[str, Any] | None = None,
    ) -> Path:
        """Write a new checkpoint atomically, then rotate old ones.

        Args:
            state: Entries to save. Objects with ``state_dict()`` (modules, optimizers,
                schedulers, scalers, a TrainState) are saved through it; DDP and
                ``torch.compile`` wrappers are unwrapped so files load into plain models.
                Other values must be tensors, numpy arrays, numbers, strings, or
                lists/tuples/dicts of these.
            step: Training step (a non-negative int); it is encoded in the file name.
            epoch: Optional epoch number.
            metrics: Optional ``{name: number}``; ``monitor`` ranks checkpoints by it.

        Returns:
            Path of the new checkpoint file.

        Raises:
            TypeError: A value cannot be stored safely (named in the message).
            ValueError: ``step`` is not a non-negative int.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be a non-negative int, got {step!r}")
        existing = self.checkpoints()
        self._remove_stale_temporaries()
        seq = existing[-1].seq + 1 if existing else 1
        payload = _build_payload(state, seq=seq, step=step, epoch=epoch, metrics=metrics)
        info = CheckpointInfo(
            path=self.directory / f"ckpt-{seq:06d}-step{step}.pt",
            seq=seq,
            step=step,
            epoch=epoch,
            metrics=payload["metrics"],
        )
        atomic_write(info.path, lambda file: torch.save(payload, file), fsync=self.fsync)
        self._meta_cache[info.path.name] = info
        self._rotate([*existing, info])
        return info.path

    def _rotate(self, found: list[CheckpointInfo]) -> None:
        keep = {c.seq for c in (found if self.keep_last is None else found[-self.keep_last :])}
        keep.update(c.seq for c in self._ranked_best(found)[: self.keep_best])
        kept = [c for c in found if c.seq in keep]
        doomed = [c.path for c in found if c.seq not in keep]
        for path in doomed:
            self._meta_cache.pop(path.name, None)
        self._write_index(kept)
        if doomed:
            # Unlinking a 200 MB file costs ~70 ms on ext4: do it off the training thread.
            # Not a daemon thread, so it completes before the interpreter exits.
            self._deleter = threading.Thread(target=_unlink_all, args=(doomed,))
            self._deleter.start()

    def wait(self) -> None:
        """Block until files removed by the last rotation are deleted."""
        if self._deleter is not None:
            self._deleter.join()
            self._deleter = None

    # ----------------------------------------------------------------- index

    def _write_index(self, kept: list[CheckpointInfo]) -> None:
        best = self._ranked_best(kept)
        data = {
            "format": FORMAT_VERSION,
            "latest": kept[-1].path.name if kept else None,
            "best": best[0].path.name if best else None,
            "monitor": self.monitor,
            "mode": self.mode,
            "checkpoints": [{"file": c.path.name, **_meta(c)} for c in kept],
        }
        _write_json(self.directory / _INDEX, data)

    def _read_index(self) -> dict[str, CheckpointInfo]:
        try:
            data = json.loads((self.directory / _INDEX).read_text(encoding="utf-8"))
            return {
                e["file"]: CheckpointInfo(
                    path=self.directory / e["file"],
                    seq=int(e["seq"]),
                    step=int(e["step"]),
                    epoch=e.get("epoch"),
                    metrics={str(k): float(v) for k, v in (e.get("metrics") or {}).items()},
                )
                for e in data.get("checkpoints", [])
            }
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            # A missing or unreadable index is rebuilt from the files themselves.
            return {}

    def _read_meta(self, path: Path, seq: int, step: int) -> CheckpointInfo:
        """Metadata of a checkpoint absent from the index (read lazily via mmap)."""
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            metrics = dict(payload.get("metrics") or {})
            return CheckpointInfo(path, seq, step, payload.get("epoch"), metrics)
        except Exception:
            # Unreadable: still listed (so rotation and fallback see it) without metadata.
            return CheckpointInfo(path=path, seq=seq, step=step)

    def _remove_stale_temporaries(self) -> None:
        # Left behind by a writer killed mid-save; never a valid checkpoint. Only the (single)
        # writer removes them, in save(): a reader might otherwise delete a file in flight.
        for entry in os.scandir(self.directory):
            if entry.name.startswith(TMP_PREFIX) and entry.is_file():
                Path(entry.path).unlink(missing_ok=True)

    # ----------------------------------------------------------------- loading

    def load(
        self,
        state: Mapping[str, Any] | None = None,
        which: str | os.PathLike[str] = "latest",
        *,
        strict: bool = True,
        scope: str | None = None,
        fallback: bool = True,
        map_location: str | torch.device | None = "cpu",
    ) -> LoadResult:
        """Restore ``state`` in place from a checkpoint.

        Args:
            state: Entries to restore, keyed as when saved. Objects with
                ``load_state_dict`` are restored in place; other values are ignored
                (the saved value is returned in :attr:`LoadResult.values`).
            which: ``"latest"``, ``"best"`` (needs ``monitor``) or a path to a file.
            strict: If True, any missing, unexpected or shape-mismatched key raises
                :class:`CheckpointMismatchError` naming them. If False, matching keys are
                loaded, the rest are skipped, reported in the result and warned about.
            scope: Restore only module keys under this prefix (``"encoder"`` loads
                ``encoder.*``). Non-module entries (optimizers, schedulers) are not
                restored when a scope is given.
            fallback: For ``"latest"``/``"best"``: if the chosen file is unreadable, warn
                and try the previous checkpoint (next best for ``"best"``). Explicit paths
                never fall back.
            map_location: Passed to ``torch.load``; ``"cpu"`` by default (``load_state_dict``
                copies values onto the device of each parameter).

        Returns:
            A :class:`LoadResult` with step, epoch, metrics, the plain values and the key report.

        Raises:
            FileNotFoundError: No checkpoint exists (or the path does not exist).
            CorruptCheckpointError: The file cannot be read (and no fallback succeeded).
            CheckpointMismatchError: ``strict=True`` and the checkpoint does not fit.
        """
        candidates = self._candidates(which)
        payload, path = self._load_first_readable(
            candidates, fallback and not self._is_path(which), map_location
        )
        return self._restore(dict(state or {}), payload, path, strict=strict, scope=scope)

    @staticmethod
    def _is_path(which: str | os.PathLike[str]) -> bool:
        return not (isinstance(which, str) and which in ("latest", "best"))

    def _candidates(self, which: str | os.PathLike[str]) -> list[Path]:
        if self._is_path(which):
            path = Path(which)
            if not path.is_file():
                raise FileNotFoundError(
                    f"checkpoint file {str(path)!r} does not exist (which= takes 'latest', "
                    "'best' or the path of a checkpoint file)"
                )
            return [path]
        found = self.checkpoints()
        if which == "best":
            if not self.monitor:
                raise ValueError("which='best' needs CheckpointManager(monitor='<metric name>')")
            found = self._ranked_best(found)
            if not found:
                raise FileNotFoundError(
                    f"no checkpoint in {str(self.directory)!r} has metric {self.monitor!r}"
                )
            return [c.path for c in found]
        if not found:
            raise FileNotFoundError(
                f"no checkpoint in {str(self.directory)!r}; check `manager.latest_path is not "
                "None` before resuming"
            )
        return [c.path for c in reversed(found)]

    def _load_first_readable(
        self, candidates: list[Path], fallback: bool, map_location: Any
    ) -> tuple[dict[str, Any], Path]:
        # Memory-map on CPU: modules copy straight from the page cache, once; every other
        # tensor is cloned in _restore so nothing keeps the file mapped afterwards.
        mmap = map_location is None or torch.device(map_location).type == "cpu"
        errors: list[CorruptCheckpointError] = []
        for path in candidates:
            try:
                return read_checkpoint(path, map_location=map_location, mmap=mmap), path
            except CorruptCheckpointError as error:
                errors.append(error)
                if not fallback:
                    raise
                warnings.warn(f"{error}; trying the previous checkpoint", stacklevel=3)
        raise CorruptCheckpointError(
            candidates[0], "no readable checkpoint left: " + "; ".join(str(e) for e in errors)
        )

    def _restore(
        self,
        state: dict[str, Any],
        payload: dict[str, Any],
        path: Path,
        *,
        strict: bool,
        scope: str | None,
    ) -> LoadResult:
        saved: dict[str, Any] = payload["state"]
        result = LoadResult(
            path=path,
            step=int(payload["step"]),
            epoch=payload.get("epoch"),
            metrics=dict(payload.get("metrics") or {}),
        )
        restored: set[str] = set()
        for name, target in state.items():
            obj = _unwrap(target)
            if not _is_stateful(obj) or (scope is not None and not isinstance(obj, nn.Module)):
                continue  # plain values are returned; a scope restores modules only
            if name not in saved:
                self._missing_entry(name, saved, path, strict, result)
            elif isinstance(obj, nn.Module):
                _load_module(name, obj, saved[name], scope, strict, result)
                restored.add(name)
            else:
                obj.load_state_dict(_from_storable(saved[name], copy=True))
                restored.add(name)
        result.values = {k: _from_storable(v, True) for k, v in saved.items() if k not in restored}
        if not result.clean:
            warnings.warn(_describe_skipped(result), stacklevel=3)
        return result

    @staticmethod
    def _missing_entry(
        name: str, saved: Mapping[str, Any], path: Path, strict: bool, result: LoadResult
    ) -> None:
        if strict:
            raise CheckpointMismatchError(
                f"checkpoint {str(path)!r} has no entry {name!r}; it has: "
                f"{_format_keys(sorted(saved))}. Pass strict=False to skip it."
            )
        result.missing_keys[name] = ["<whole entry>"]


def _describe_skipped(result: LoadResult) -> str:
    parts = [f"loaded {str(result.path)!r} with strict=False; skipped keys:"]
    for label, report in (
        ("missing", result.missing_keys),
        ("unexpected", result.unexpected_keys),
        ("shape mismatch", result.mismatched_keys),
    ):
        for name, keys in report.items():
            parts.append(f"  {name} {label} ({len(keys)}): {_format_keys(keys)}")
    return "\n".join(parts)


def read_checkpoint(
    path: str | os.PathLike[str],
    *,
    map_location: str | torch.device | None = "cpu",
    mmap: bool = False,
) -> dict[str, Any]:
    """Read one checkpoint file safely (``weights_only=True``) and check its layout.

    Args:
        path: A file written by :meth:`CheckpointManager.save`.
        map_location: Passed to ``torch.load``.
        mmap: Memory-map the file instead of reading it (tensors stay backed by the file).

    Returns:
        The raw payload: ``{"step", "epoch", "metrics", "seq", "stateful", "state"}``.

    Raises:
        CorruptCheckpointError: The file is truncated, damaged, holds objects that are not
            allowed with ``weights_only=True``, or is not a scramjet checkpoint.
    """
    path = Path(path)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise
    except Exception as error:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        raise CorruptCheckpointError(path, reason) from error
    if not isinstance(payload, dict) or _MARKER not in payload or "state" not in payload:
        raise CorruptCheckpointError(
            path, "not a scramjet checkpoint (expected a file written by CheckpointManager.save)"
        )
    if payload[_MARKER] > FORMAT_VERSION:
        raise CorruptCheckpointError(
            path,
            f"written by a newer scramjet (format {payload[_MARKER]}, this one reads "
            f"{FORMAT_VERSION}); upgrade scramjet",
        )
    return payload


def _build_payload(
    state: Mapping[str, Any],
    *,
    seq: int,
    step: int,
    epoch: int | None,
    metrics: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The dict stored in a checkpoint file (objects with ``state_dict`` saved through it)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a dict of entries, got {type(state).__qualname__}")
    payload_state: dict[str, Any] = {}
    stateful: list[str] = []
    for key, value in state.items():
        if not isinstance(key, str):
            raise TypeError(f"state keys must be strings, got {key!r}")
        obj = _unwrap(value)
        if _is_stateful(obj):
            payload_state[key] = _to_storable(obj.state_dict(), f"state[{key!r}].state_dict()")
            stateful.append(key)
        else:
            payload_state[key] = _to_storable(value, f"state[{key!r}]")
    return {
        _MARKER: FORMAT_VERSION,
        "seq": seq,
        "step": step,
        "epoch": epoch,
        "metrics": _clean_metrics(metrics),
        "stateful": stateful,
        "state": payload_state,
    }


def write_checkpoint(
    path: str | os.PathLike[str],
    state: Mapping[str, Any],
    *,
    step: int = 0,
    epoch: int | None = None,
    metrics: Mapping[str, Any] | None = None,
    fsync: bool = True,
) -> Path:
    """Write one checkpoint file atomically, outside any manager's rotation.

    The file has the same layout as :meth:`CheckpointManager.save` writes, so
    :meth:`CheckpointManager.load` (with ``which=path``) and :func:`read_checkpoint` read it.
    A crash during the write leaves any previous file at ``path`` intact.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = _build_payload(state, seq=0, step=step, epoch=epoch, metrics=metrics)
    atomic_write(target, lambda file: torch.save(payload, file), fsync=fsync)
    return target
