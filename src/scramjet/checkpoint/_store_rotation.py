"""Which checkpoints on the store rotation may count among the ``keep_best`` best: those
that can be read. A stored best that was damaged (an upload cut short, bytes flipped) never
holds a place a readable checkpoint then loses."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scramjet.checkpoint._reading import read_complete
from scramjet.checkpoint._remote_files import _fetch
from scramjet.checkpoint.payload import CheckpointError
from scramjet.checkpoint.records import CheckpointInfo

if TYPE_CHECKING:
    from scramjet.tracking.storage import StorageTimeouts

__all__ = ["StoreBestChecker"]

_VERSION_KEYS = ("size", "ETag", "LastModified", "mtime", "created")


class StoreBestChecker:
    """Whether a checkpoint that only the store holds can be read: it is downloaded into
    a temporary folder and its checksum and layout are checked once per version of the
    stored object (size, ETag, modification time), so a save costs one metadata request
    per stored best checkpoint rotation keeps."""

    def __init__(self, fs: Any, root: str, url: str, timeouts: StorageTimeouts) -> None:
        self._fs, self._root, self._url, self._timeouts = fs, root, url, timeouts
        self._seen: dict[str, tuple[tuple[str, ...], bool]] = {}
        self._reasons: dict[str, str] = {}  # why a damaged version cannot be read

    def _version(self, remote: str) -> tuple[str, ...] | None:
        self._fs.invalidate_cache(remote)  # another machine may have replaced it
        try:
            info = self._fs.info(remote)
        except FileNotFoundError:
            return None
        return tuple(str(info.get(key)) for key in _VERSION_KEYS)

    def uploaded(self, name: str) -> None:
        """``name`` was just uploaded from a checked local copy: readable as it is now (a
        store that does not answer leaves it unknown: it is checked when it counts)."""
        try:
            version = self._version(f"{self._root}/{name}")
        except Exception:  # a cache: the upload succeeded, the save goes on
            return
        if version is not None:
            self._seen[name] = (version, True)

    def damage(self, name: str) -> str | None:
        """Why the stored ``name`` cannot be read (None when it can): downloaded and
        checked once per version of the object."""
        remote = f"{self._root}/{name}"
        version = self._version(remote)
        if version is None:
            return f"checkpoint '{self._url}/{name}' is no longer on the store"
        seen = self._seen.get(name)
        if seen is None or seen[0] != version:
            seen = (version, self._check(remote, name) is None)
            self._seen[name] = seen
        return None if seen[1] else self._reasons.get(name, "it cannot be read")

    def _check(self, remote: str, name: str) -> str | None:
        with tempfile.TemporaryDirectory(prefix="scramjet-check-") as folder:
            copy = Path(folder) / name
            try:
                _fetch(self._fs, remote, copy, reuse=False, timeouts=self._timeouts)
                read_complete(copy, map_location="cpu", mmap=True)
            except (CheckpointError, OSError) as error:
                self._reasons[name] = str(error).replace(str(copy), f"{self._url}/{name}")
                return self._reasons[name]
        return None

    def readable(self, info: CheckpointInfo, places: int) -> bool:
        """Whether the stored ``info`` can be read; a warning names it when it cannot."""
        reason = self.damage(info.path.name)
        if reason is not None:
            warnings.warn(
                f"{reason}. It ranks among the keep_best={places} best checkpoints on the "
                "store, but rotation no longer counts it: the best readable ones keep their "
                "places, and this file is removed like any checkpoint rotation does not keep.",
                UserWarning,
                stacklevel=3,
            )
        return reason is None
