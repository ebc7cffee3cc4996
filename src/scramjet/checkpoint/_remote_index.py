"""The index of a remote checkpoint folder: ``index.json`` next to the files on the store.

It holds what the local index holds (step, epoch and metrics of each checkpoint, and the
ranking rule) for the checkpoints on the store, so that ``which="best"`` on a machine
whose local folder is empty or older ranks every checkpoint of the run and downloads only
the best one. Like the local index it is a cache: a checkpoint it does not name is on the
store all the same (``latest`` goes by the listing), it only does not rank.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scramjet.checkpoint._remote_files import _fetch, _upload_file
from scramjet.checkpoint.payload import FORMAT_VERSION
from scramjet.checkpoint.records import (
    INDEX,
    CheckpointInfo,
    read_index,
    read_ranking,
    write_index,
)

if TYPE_CHECKING:
    from scramjet.tracking.storage import StorageTimeouts

__all__ = ["StoreIndex", "publish_store_index", "read_store_index"]


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
