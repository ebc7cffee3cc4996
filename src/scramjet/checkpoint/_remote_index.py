"""The index of a remote checkpoint folder: ``index.json`` next to the files on the store.

It holds what the local index holds (step, epoch and metrics of each checkpoint, and the
ranking rule) for the checkpoints on the store, so that ``which="best"`` on a machine
whose local folder is empty or older ranks every checkpoint of the run and downloads only
the best one. Like the local index it is a cache: a checkpoint it does not name is on the
store all the same (``latest`` goes by the listing). A store whose index is missing (a run
saved before the store had one), damaged, or behind its listing gets the step, epoch and
metrics of each checkpoint it lacks from that file's own metadata (the zip directory and
the pickled dict, a few KiB: the tensors are not read), and the completed index is
written back, so that this is done once.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from scramjet.checkpoint._remote_files import _bounds, _fetch, _read, _upload_file
from scramjet.checkpoint.payload import FORMAT_VERSION
from scramjet.checkpoint.records import (
    INDEX,
    NAME_RE,
    CheckpointInfo,
    read_index,
    read_ranking,
    write_index,
)

if TYPE_CHECKING:
    from scramjet.tracking.storage import StorageTimeouts

__all__ = ["StoreIndex", "complete_store_index", "publish_store_index", "read_store_index"]

_META_BLOCK = 1 << 16  # bytes per read of a checkpoint's metadata: its zip directory is small


@dataclasses.dataclass
class StoreIndex:
    """The store's index: entries by file name (paths under ``folder``) and its ranking."""

    entries: dict[str, CheckpointInfo]
    monitor: str | None = None
    mode: str | None = None


def read_store_index(
    fs: Any, root: str, folder: Path, timeouts: StorageTimeouts | None
) -> StoreIndex:
    """The index at ``root`` (empty when the store has none), its paths under ``folder``."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            _fetch(fs, f"{root}/{INDEX}", Path(tmp) / INDEX, reuse=False, timeouts=timeouts)
        except FileNotFoundError:  # a run saved before the store had an index, or none yet
            return StoreIndex({})
        # A damaged index reads as empty (read_index, read_ranking): it is rebuilt.
        entries = read_index(Path(tmp))
        monitor, mode = read_ranking(Path(tmp))
    moved = {name: dataclasses.replace(e, path=folder / name) for name, e in entries.items()}
    return StoreIndex(moved, monitor, mode)


def publish_store_index(
    fs: Any,
    root: str,
    index: StoreIndex,
    *,
    protocol: str,
    attempts: int,
    timeouts: StorageTimeouts | None,
) -> BaseException | None:
    """Upload ``index`` to ``root`` (a complete file or nothing); the error if it failed."""
    kept = sorted(index.entries.values(), key=lambda info: info.seq)
    with tempfile.TemporaryDirectory() as tmp:
        write_index(
            Path(tmp), kept, monitor=index.monitor, mode=index.mode or "min", version=FORMAT_VERSION
        )
        return _upload_file(fs, Path(tmp) / INDEX, f"{root}/{INDEX}", protocol, attempts, timeouts)


def _stored_meta(fs: Any, path: str, local: Path, bounds: StorageTimeouts | None) -> CheckpointInfo:
    """Step, epoch and metrics of the stored checkpoint ``path``, read from the file on the
    store without its tensors (``map_location="meta"``); none when it cannot be read."""
    seq, step = (int(part) for part in NAME_RE.match(local.name).groups())  # type: ignore[union-attr]

    def read() -> dict[str, Any]:
        with fs.open(path, "rb", block_size=_META_BLOCK) as file:
            payload = torch.load(file, map_location="meta", weights_only=True)
        return payload if isinstance(payload, dict) else {}

    try:
        payload = _read(_bounds(bounds), f"the metadata of {path}", read)
        metrics = {str(k): float(v) for k, v in dict(payload.get("metrics") or {}).items()}
        return CheckpointInfo(local, seq, step, payload.get("epoch"), metrics)
    except Exception:  # unreadable or damaged: listed without metrics (it does not rank)
        return CheckpointInfo(local, seq, step)


def complete_store_index(
    fs: Any,
    root: str,
    index: StoreIndex,
    names: list[str],
    folder: Path,
    timeouts: StorageTimeouts | None,
) -> bool:
    """Add to ``index`` the stored checkpoints ``names`` it lacks (their paths under
    ``folder``), read from the files' metadata; whether it added any."""
    missing = [name for name in names if name not in index.entries]
    for name in missing:
        index.entries[name] = _stored_meta(fs, f"{root}/{name}", folder / name, timeouts)
    return bool(missing)
