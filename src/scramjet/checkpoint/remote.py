"""Checkpoints on object storage (``s3://``, ``gs://``, any fsspec URL).

Saving keeps a **local copy, then uploads it**: :class:`RemoteCheckpointManager` is a
:class:`CheckpointManager` over a local folder (atomic, checksummed files written by the
background writer) whose ``on_saved`` step, still on the writer thread, uploads the new
file through :class:`scramjet.tracking.storage.RunStorage` (timeouts, retries with
backoff) and then deletes the remote checkpoints that rotation no longer keeps. Why a
local copy: the checksum and the atomic rename happen where they are cheap and certain,
an upload can be retried from it, and a failed upload loses nothing.

- An upload that fails after its retries is reported with a warning; the file stays in
  the local folder (rotation skips it) and is uploaded again after the next save. If it
  is still missing when the manager is closed, :class:`CheckpointWriteError` (``saved``
  True) names it and its local path.
- A crash in the middle of an upload leaves no partial checkpoint on an object store: a
  PUT (or a multi-part upload) becomes visible only once complete. Every file is also
  checked against its checksum when it is read back, and reading ``latest`` falls back to
  the previous checkpoint, so a damaged newest object is skipped with a warning.
- Numbering continues after the highest sequence number found remotely, so a run that
  resumes on a fresh machine (empty local folder) never reuses a name.

Reading (:func:`load_remote`) lists the remote folder, downloads the newest checkpoint
into the local folder (atomically; a local copy of the same size is used as is) and
loads it; a damaged one is skipped for the previous one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scramjet.checkpoint.manager import (
    _NAME_RE,
    CheckpointInfo,
    CheckpointManager,
    CheckpointWriteError,
    CorruptCheckpointError,
    LoadResult,
)
from scramjet.runtime.files import atomic_write

__all__ = [
    "RemoteCheckpointManager",
    "default_local_dir",
    "has_checkpoints",
    "is_url",
    "load_remote",
]


def is_url(location: object) -> bool:
    """Whether ``location`` is an fsspec URL (``scheme://...``) rather than a local path."""
    return isinstance(location, str) and "://" in location


def default_local_dir(url: str) -> Path:
    """The local folder that holds copies of the checkpoints under ``url``.

    ``<temp dir>/scramjet-checkpoints/<16 hex of the URL's SHA-1>``: the same for every
    process of the machine, so a restarted run finds the files it already has.
    """
    digest = hashlib.sha1(url.rstrip("/").encode("utf-8"), usedforsecurity=False).hexdigest()
    return Path(tempfile.gettempdir()) / "scramjet-checkpoints" / digest[:16]


def _open(url: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    from scramjet.tracking.storage import StorageTimeouts, open_filesystem, with_default_timeouts

    options = with_default_timeouts(url, storage_options, StorageTimeouts())
    return open_filesystem(url.rstrip("/"), options)


def _remote_names(fs: Any, root: str) -> list[tuple[int, str]]:
    """``(seq, name)`` of the checkpoint files under ``root``, oldest first."""
    try:
        entries = fs.ls(root, detail=False)
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        name = str(entry).rstrip("/").rsplit("/", 1)[-1]
        match = _NAME_RE.match(name)
        if match is not None:
            found.append((int(match[1]), name))
    return sorted(found)


def has_checkpoints(
    location: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> bool:
    """Whether a local folder or a remote URL holds at least one checkpoint file."""
    if is_url(location):
        fs, root = _open(str(location), storage_options)
        return bool(_remote_names(fs, root))
    folder = Path(location)
    if folder.is_file():
        return True
    return folder.is_dir() and any(_NAME_RE.match(e.name) for e in os.scandir(folder))


def _fetch(fs: Any, remote: str, local: Path) -> Path:
    """Download ``remote`` to ``local`` atomically (a local file of the same size is kept)."""
    size = int(fs.size(remote))
    if local.is_file() and local.stat().st_size == size:
        return local
    local.parent.mkdir(parents=True, exist_ok=True)

    def copy(file: Any) -> None:
        with fs.open(remote, "rb") as source:
            for block in iter(lambda: source.read(1 << 22), b""):
                file.write(block)

    atomic_write(local, copy, fsync=False)
    return local


def load_remote(
    url: str,
    state: Mapping[str, Any],
    *,
    local_dir: str | os.PathLike[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> LoadResult:
    """Restore ``state`` from the newest good checkpoint under ``url`` (or from one file).

    Args:
        url: A remote folder of checkpoints, or one checkpoint file.
        state: Entries to restore, as for :meth:`CheckpointManager.load`.
        local_dir: Where downloaded files go (default :func:`default_local_dir`).
        storage_options: Passed to fsspec.

    Raises:
        FileNotFoundError: Nothing to load at ``url``.
        CorruptCheckpointError: No candidate passed its checksum.
    """
    fs, root = _open(url, storage_options)
    folder = Path(local_dir) if local_dir is not None else default_local_dir(url)
    manager = CheckpointManager(folder, keep_last=None)
    if fs.isfile(root):
        name = root.rsplit("/", 1)[-1]
        return manager.load(state, which=_fetch(fs, root, folder / name))
    names = [name for _, name in reversed(_remote_names(fs, root))]
    if not names:
        raise FileNotFoundError(
            f"no checkpoint under {url!r}: expected files named ckpt-<seq>-step<step>.pt, as "
            "SaveTrainingStateCallback writes. Check the URL, or start without resume_from."
        )
    errors = []
    for i, name in enumerate(names):
        local = _fetch(fs, f"{root}/{name}", folder / name)
        try:
            return manager.load(state, which=local)
        except CorruptCheckpointError as error:
            errors.append(str(error))
            local.unlink(missing_ok=True)  # never reuse a damaged copy
            if i + 1 < len(names):
                warnings.warn(
                    f"{error} (downloaded from {url}/{name}); trying the previous "
                    f"checkpoint {url}/{names[i + 1]}",
                    stacklevel=3,
                )
    raise CorruptCheckpointError(folder / names[0], "no readable checkpoint: " + "; ".join(errors))


class RemoteCheckpointManager(CheckpointManager):
    """A :class:`CheckpointManager` whose files are also uploaded to ``url``.

    Args:
        url: Remote folder (``s3://bucket/run/checkpoints``, any fsspec URL).
        local_dir: Local folder of the copies (default :func:`default_local_dir`).
        storage_options: Passed to fsspec (credentials, ``client_kwargs``...).
        upload_attempts: Tries per upload (with backoff) before it waits for the next save.
        **kwargs: The other :class:`CheckpointManager` options (``keep_last`` applies
            to the local folder and to the remote one).
    """

    def __init__(
        self,
        url: str,
        local_dir: str | os.PathLike[str] | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        upload_attempts: int = 4,
        **kwargs: Any,
    ) -> None:
        from scramjet.tracking.storage import RunStorage

        if not is_url(url):
            raise ValueError(
                f"RemoteCheckpointManager needs a URL such as 's3://bucket/run/checkpoints'; "
                f"received {url!r}. Use CheckpointManager for a local folder."
            )
        if kwargs.get("on_saved") is not None:
            raise ValueError("RemoteCheckpointManager uploads in on_saved; it takes no on_saved.")
        self.url = url.rstrip("/")
        folder = Path(local_dir) if local_dir is not None else default_local_dir(self.url)
        super().__init__(folder, on_saved=self._upload, **kwargs)
        self.storage = RunStorage(
            folder, self.url, storage_options, workers=1, max_attempts=upload_attempts
        )
        self.not_uploaded: dict[str, str] = {}  # file name -> last upload error
        try:
            remote = _remote_names(self.storage.fs, self.storage.remote_root)
        except Exception as error:  # listing failed: numbering follows the local folder
            warnings.warn(f"could not list {self.url}: {error}", RuntimeWarning, stacklevel=2)
            remote = []
        self._remote_highest = remote[-1][0] if remote else 0

    def __repr__(self) -> str:
        return f"RemoteCheckpointManager({self.url!r}, local_dir={str(self.directory)!r})"

    def _scan(self) -> tuple[list[CheckpointInfo], int]:
        found, highest = super()._scan()
        return found, max(highest, self._remote_highest)

    def _rotate(self, found: list[CheckpointInfo], *, background: bool = False) -> OSError | None:
        # A file that is not uploaded yet is never rotated away locally.
        kept = [c for c in found if c.path.name not in self.not_uploaded]
        return super()._rotate(kept, background=background)

    def _send(self, name: str) -> str | None:
        """Upload one local file; the error text if it failed after its retries."""
        self.storage.upload(name)
        self.storage.wait()
        return self.storage.errors.get(name) or self.storage.fatal

    def _upload(self, info: CheckpointInfo) -> None:
        for name in [*sorted(self.not_uploaded), info.path.name]:
            if not (self.directory / name).is_file():
                self.not_uploaded.pop(name, None)
                continue
            error = self._send(name)
            if error is None:
                self.not_uploaded.pop(name, None)
                self._remote_highest = max(self._remote_highest, _seq(name))
                continue
            self.not_uploaded[name] = error
            warnings.warn(
                f"checkpoint {name} was saved locally at {str(self.directory / name)!r} but "
                f"not uploaded to {self.url}: {error}. The local copy is kept and the upload "
                "is tried again after the next save.",
                RuntimeWarning,
                stacklevel=2,
            )
        if not self.not_uploaded:
            self._remove_rotated_remote()

    def _remove_rotated_remote(self) -> None:
        if self.keep_last is None:
            return
        fs, root = self.storage.fs, self.storage.remote_root
        try:
            names = _remote_names(fs, root)
            for _, name in names[: max(0, len(names) - self.keep_last)]:
                fs.rm_file(f"{root}/{name}")
        except Exception as error:  # rotation is tidying: the next save tries again
            warnings.warn(f"could not rotate {self.url}: {error}", RuntimeWarning, stacklevel=2)

    def close(self) -> None:
        """Flush the write in flight, retry failed uploads, then free the buffers.

        Raises:
            CheckpointWriteError: Checkpoints are still not uploaded (``saved`` is True:
                the local copies are complete; the message names them).
        """
        super().close()
        for name in sorted(self.not_uploaded):
            if not (self.directory / name).is_file() or self._send(name) is None:
                self.not_uploaded.pop(name, None)
        if self.not_uploaded:
            names = ", ".join(sorted(self.not_uploaded))
            last = self.not_uploaded[max(self.not_uploaded)]
            raise CheckpointWriteError(
                f"checkpoints {names} were saved in {str(self.directory)!r} but could not be "
                f"uploaded to {self.url} ({last}). They are complete and kept locally: copy "
                "them to the remote folder, or resume from the local folder.",
                self.directory / max(self.not_uploaded),
                saved=True,
            )
        self._remove_rotated_remote()


def _seq(name: str) -> int:
    match = _NAME_RE.match(name)
    return int(match[1]) if match else 0
