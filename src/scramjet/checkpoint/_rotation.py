"""Which checkpoints rotation keeps: the last ``keep_last`` and the ``keep_best`` best that
can be read. A best-ranked file that was damaged after it was written (truncated, bytes
flipped) never holds a place a readable checkpoint then loses, and is never the one
``index.json`` names as ``"best"`` (:meth:`BestChecker.intact_best`)."""

from __future__ import annotations

import warnings
from pathlib import Path

from scramjet.checkpoint._reading import read_complete
from scramjet.checkpoint.payload import CorruptCheckpointError
from scramjet.checkpoint.records import CheckpointInfo
from scramjet.runtime.stacklevel import user_stacklevel

__all__ = ["BestChecker", "keep_seqs"]


class BestChecker:
    """Whether a best-ranked checkpoint can be read: its checksum and layout are checked
    (tensors memory-mapped, not read) once per version of the file (size, mtime), so a
    save costs one ``stat`` per kept best checkpoint."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[int, int], bool]] = {}

    def written(self, path: Path) -> None:
        """``path`` was just written and checksummed: readable without reading it again."""
        version = self._version(path)
        if version is not None:
            self._seen[path.name] = (version, True)

    def forget(self, path: Path) -> None:
        self._seen.pop(path.name, None)

    @staticmethod
    def _version(path: Path) -> tuple[int, int] | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        return stat.st_size, stat.st_mtime_ns

    def readable(self, info: CheckpointInfo, places: int) -> bool:
        """Whether ``info`` can be read, for rotation's ``keep_best`` places; a warning
        names it the first time it is found damaged."""
        return self._check(
            info,
            f"It ranks among the keep_best={places} best checkpoints, but rotation no longer "
            "counts it: the best readable ones keep their places, and this file is removed "
            "like any checkpoint rotation does not keep.",
        )

    def intact_best(self, info: CheckpointInfo, monitor: str | None) -> bool:
        """Whether ``info``, ranked best by ``monitor``, can be read before ``index.json``
        names it as best; a warning names it the first time it is found damaged."""
        value = info.metrics.get(monitor or "")
        return self._check(
            info,
            f"Its {monitor}={value} ranks it best, but index.json no longer names it as "
            '"best": that is now the best checkpoint that can be read, and '
            "load(which='best') skips this file too. Put back a good copy of it (from a "
            "backup or the remote store), or delete it.",
        )

    def _check(self, info: CheckpointInfo, consequence: str) -> bool:
        """Checksum and layout of ``info`` checked once per version of the file (a version
        this manager wrote counts as checked); ``consequence`` ends the warning."""
        version = self._version(info.path)
        if version is None:
            return False
        seen = self._seen.get(info.path.name)
        if seen is not None and seen[0] == version:
            return seen[1]
        try:
            read_complete(info.path, map_location="cpu", mmap=True)
            good = True
        except (CorruptCheckpointError, OSError) as error:
            good = False
            warnings.warn(f"{error}. {consequence}", UserWarning, stacklevel=user_stacklevel())
        self._seen[info.path.name] = (version, good)
        return good


def keep_seqs(
    found: list[CheckpointInfo],
    keep_last: int | None,
    keep_best: int,
    ranked: list[CheckpointInfo],
    checker: BestChecker,
) -> set[int]:
    """The ``seq`` of every checkpoint of ``found`` (oldest first) rotation keeps: the last
    ``keep_last``, and the first ``keep_best`` of ``ranked`` (best first) that can be read.
    Files are only checked when rotation is about to delete something."""
    last = {c.seq for c in (found if keep_last is None else found[-keep_last:])}
    naive = last | {c.seq for c in ranked[:keep_best]}
    if not keep_best or len(naive) == len(found):
        return naive  # nothing is deleted: no place to lose
    best: set[int] = set()
    for info in ranked:
        if len(best) == keep_best:
            break
        if checker.readable(info, keep_best):
            best.add(info.seq)
    return last | best
