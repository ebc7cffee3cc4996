"""Reading one checkpoint file: :func:`read_checkpoint` and why a file cannot be read.

A file that a manager of this process is still writing in the background is waited for
first (:data:`_WRITERS`, filled by :meth:`CheckpointManager.save`).
"""

from __future__ import annotations

import os
import re
import weakref
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from scramjet.checkpoint._map_location import MapLocation, check_map_location
from scramjet.checkpoint.payload import (
    ChecksumMismatch,
    CorruptCheckpointError,
    check_layout,
    verify_file,
)

if TYPE_CHECKING:
    from scramjet.checkpoint.manager import CheckpointManager

__all__ = ["read_checkpoint"]

# Managers with a write in flight, per directory: a reader in this process waits for them.
_WRITERS: dict[str, weakref.WeakSet[CheckpointManager]] = {}


def read_checkpoint(
    path: str | os.PathLike[str],
    *,
    map_location: MapLocation = "cpu",
    mmap: bool = False,
) -> dict[str, Any]:
    """Read one checkpoint file safely (``weights_only=True``) and check its layout.

    Args:
        path: A file written by :meth:`CheckpointManager.save`.
        map_location: Passed to ``torch.load``.
        mmap: Memory-map the file instead of reading it (tensors stay backed by the file).

    Returns:
        The raw payload: ``{"step", "epoch", "metrics", "seq", "stateful", "state"}``,
        and ``"classes"`` (each entry's class) in files that record it.

    Raises:
        CorruptCheckpointError: The file does not match its checksum, is truncated,
            damaged, malformed (a field missing or of the wrong type), holds objects that
            are not allowed with ``weights_only=True``, or is not a scramjet checkpoint.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"read_checkpoint reads one checkpoint file; {str(path)!r} is a folder. For the "
            f"newest checkpoint in it use CheckpointManager({str(path)!r}).load(state)"
        )
    check_map_location(map_location)  # else torch's refusal would read as a damaged file
    for manager in list(_WRITERS.get(os.path.realpath(path.parent), ())):
        manager._writer.join()  # a file being written by this process: read it once complete
    return read_complete(path, map_location=map_location, mmap=mmap)


def read_complete(path: Path, *, map_location: MapLocation, mmap: bool) -> dict[str, Any]:
    """:func:`read_checkpoint` of a file no write of this process is still making (the
    writer's own thread calls this: it must not wait for itself)."""
    try:
        checked = verify_file(path)  # before parsing: damaged bytes never reach the unpickler
    except ChecksumMismatch as error:
        raise CorruptCheckpointError(path, str(error)) from error
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise
    except Exception as error:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        raise CorruptCheckpointError(path, _unreadable_reason(path, error)) from error
    problem = check_layout(payload, checked)
    if problem is not None:
        raise CorruptCheckpointError(path, problem)
    checked_payload: dict[str, Any] = payload
    return checked_payload


_REFUSED_GLOBAL = re.compile(r"Unsupported global: GLOBAL (\S+)")


def _unreadable_reason(path: Path, error: Exception) -> str:
    """Why ``torch.load`` could not read ``path``, in terms of the file (torch's message
    for a file that is no zip archive is about ``mmap`` and ``torch.save`` options)."""
    try:
        size = path.stat().st_size
        is_zip = zipfile.is_zipfile(path)
        with open(path, "rb") as file:
            starts_like_zip = file.read(4) == b"PK\x03\x04"
    except OSError:
        size, is_zip, starts_like_zip = -1, True, False
    if size == 0:
        return "the file is empty (0 bytes): a copy or a write that did not complete"
    if not is_zip and starts_like_zip:  # the zip directory sits at the end: cut off
        return (
            f"the file ({size} bytes) is truncated: it starts as a torch.save archive but "
            "its end is missing (a copy or a write that did not complete)"
        )
    if not is_zip:
        return (
            f"the file ({size} bytes) is not a torch.save archive, so not a checkpoint "
            "(written by CheckpointManager.save, trainer.save_checkpoint or write_checkpoint)"
        )
    refused = _REFUSED_GLOBAL.search(str(error))
    if refused is not None:
        return (
            f"it holds an object of type {refused[1]}, which torch.load(weights_only=True) "
            "refuses to build (that could run code from the file). Checkpoints written by "
            "scramjet hold tensors and plain values only; if you trust this file, read it "
            "with torch.load(path, weights_only=False) and save its values as tensors, "
            "numbers, strings, lists or dicts"
        )
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # terminal colour codes
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"
