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
- At preemption the process has about 30 s before it is killed: after
  :meth:`RemoteCheckpointManager.limit_uploads` (the save at preemption calls it with
  :data:`PREEMPTION_UPLOAD_SECONDS`), the local write is still waited for, but uploads,
  retries and remote rotation stop being waited for once the limit has passed. What is
  not uploaded stays in the local folder and is named by ``close()``; the next manager of
  that folder uploads it. Uploads run on daemon threads: one that is abandoned never
  keeps the process alive, and it never leaves a partial file under a checkpoint's name
  (object stores show an object only once complete; other file systems get a temporary
  name that is moved into place).

Reading (:func:`load_remote`) lists the remote folder, downloads the newest checkpoint
into the local folder (atomically; a local copy of the same size is used as is) and
loads it; a damaged one is skipped for the previous one. A URL naming one file is
downloaded every time: files written by ``trainer.save_checkpoint`` keep their name when
they are replaced, so a local copy of the same size may be an older checkpoint.

One file (:func:`write_remote_checkpoint`, used by ``trainer.save_checkpoint(url)``) is
written to a local staging copy, then uploaded, retried with backoff. On an object store
the upload is one PUT (or a multi-part upload that is aborted on failure), which becomes
visible only once complete: a failed or killed upload leaves the object that was there
before, or none. ``file://`` URLs are written with the local atomic rename; other
file systems get a temporary name that is moved into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from scramjet.checkpoint.manager import (
    CheckpointError,
    CheckpointManager,
    CheckpointWriteError,
    CorruptCheckpointError,
)
from scramjet.checkpoint.payload import write_checkpoint
from scramjet.checkpoint.records import NAME_RE, CheckpointInfo, LoadResult
from scramjet.runtime.files import atomic_write

__all__ = [
    "RemoteCheckpointManager",
    "check_scheme",
    "default_local_dir",
    "has_checkpoints",
    "is_url",
    "load_remote",
    "write_remote_checkpoint",
]

# Stores where an upload becomes visible only once complete (a PUT, a multi-part upload).
_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})
_LOCAL_SCHEMES = frozenset({"file", "local"})

PREEMPTION_UPLOAD_SECONDS = 10.0
"""How long the save at preemption tries its uploads, in all, before the process exits.

torch's elastic agent and Slurm kill a process about 30 s after ``SIGTERM``; the local
write is always waited for, so this leaves time for it and for the rest of the exit."""


def upload_seconds(value: object, what: str, advice: str) -> float:
    """``value`` as a time limit for uploads, in seconds; a ValueError that starts with
    ``what`` and ends with ``advice`` for anything but a number ≥ 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{what} a number of seconds ≥ 0, {advice}; received {value!r}.")
    return float(value)


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


def check_scheme(url: str) -> str:
    """The protocol of ``url`` (``"s3"``, ``"gs"``, ``"file"``...), lower case.

    Raises:
        ValueError: fsspec knows no such protocol (the message names what was received
            and what is accepted).
    """
    import fsspec

    scheme = url.split("://", 1)[0]
    known = set(fsspec.available_protocols())
    unknown = [p for p in scheme.split("::") if p.lower() not in known]
    if unknown or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.:-]*", scheme):
        raise ValueError(
            f"unknown storage scheme {scheme + '://'!r} in {url!r}. A checkpoint location is "
            "a local path or a URL whose scheme fsspec knows: s3:// (pip install "
            "'scramjet[s3]'), gs:// (pip install 'scramjet[gcs]'), file://, or another "
            "fsspec protocol (fsspec.available_protocols() lists them)."
        )
    return scheme.rsplit("::", 1)[-1].lower()


def _open(url: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    from scramjet.tracking.storage import StorageTimeouts, open_filesystem, with_default_timeouts

    check_scheme(url)
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
        match = NAME_RE.match(name)
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
    if not folder.is_dir():
        return False
    with os.scandir(folder) as entries:  # any() stops early: the listing is closed here
        return any(NAME_RE.match(e.name) for e in entries)


def _fetch(fs: Any, remote: str, local: Path, *, reuse: bool = True) -> Path:
    """Download ``remote`` to ``local`` atomically (with ``reuse``, a local file of the
    same size is kept: right for names that are never reused, such as rotation's)."""
    if reuse and local.is_file() and local.stat().st_size == int(fs.size(remote)):
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
    include_local: bool = True,
    strict: bool = True,
    scope: str | None = None,
    fallback: bool = True,
    map_location: str | torch.device | None = "cpu",
) -> LoadResult:
    """Restore ``state`` from the newest good checkpoint under ``url`` (or from one file).

    Checkpoints in ``local_dir`` that are newer than everything at ``url`` (saved by a
    :class:`RemoteCheckpointManager` whose upload failed, or was cut short by the end of
    the process) come first, with a warning: they hold the latest progress.

    Args:
        url: A remote folder of checkpoints, or one checkpoint file.
        state: Entries to restore, as for :meth:`CheckpointManager.load`.
        local_dir: Where downloaded files go (default :func:`default_local_dir`).
        storage_options: Passed to fsspec.
        include_local: Consider the local copies that are newer than the remote folder
            (False: the remote folder only, e.g. when processes on other machines must
            load the same file).
        strict, scope, map_location: As for :meth:`CheckpointManager.load`.
        fallback: Try the previous checkpoint when the newest cannot be read.

    Raises:
        FileNotFoundError: Nothing to load at ``url``.
        CorruptCheckpointError: No candidate passed its checksum.
    """
    fs, root = _open(url, storage_options)
    folder = Path(local_dir) if local_dir is not None else default_local_dir(url)
    manager = CheckpointManager(folder, keep_last=None)
    options: dict[str, Any] = {"strict": strict, "scope": scope, "map_location": map_location}
    try:
        one_file = fs.isfile(root)
        remote = [] if one_file else _remote_names(fs, root)
    except Exception as error:  # unreachable store, refused credentials...
        raise _unreadable_store(url, folder, error) from error
    if one_file:
        name = root.rsplit("/", 1)[-1]
        return manager.load(state, which=_fetch(fs, root, folder / name, reuse=False), **options)
    highest = remote[-1][0] if remote else 0
    # Complete local copies newer than the store: saved, then not uploaded (the store was
    # down, or the process died first). They hold the latest progress.
    pending = [n for q, n in _local_names(folder) if q > highest] if include_local else []
    names = [name for _, name in reversed(remote)]
    candidates = [*reversed(pending), *names][: None if fallback else 1]
    if not candidates:
        raise FileNotFoundError(
            f"no checkpoint at {url!r}: neither a checkpoint file (as trainer.save_checkpoint "
            "writes) nor a folder of files named ckpt-<seq>-step<step>.pt (as "
            "SaveTrainingStateCallback writes). Check the URL, or start without resume_from."
        )
    errors = []
    for i, name in enumerate(candidates):
        only_local = name in pending
        where = str(folder / name) if only_local else f"{url}/{name}"
        if only_local:
            warnings.warn(
                f"checkpoint {name} in {str(folder)!r} is newer than everything at {url}: it "
                "was saved but not uploaded; resuming from this local copy (a "
                "RemoteCheckpointManager of this folder uploads it with its next save)",
                stacklevel=3,
            )
        local = folder / name
        try:
            if only_local:
                return manager.load(state, which=local, **options)
            return _load_downloaded(manager, state, fs, f"{root}/{name}", local, options)
        except CorruptCheckpointError as error:
            errors.append(str(error))
            if not only_local:
                local.unlink(missing_ok=True)  # never reuse a damaged download
            if i + 1 < len(candidates):
                following = candidates[i + 1]
                following_at = (
                    str(folder / following) if following in pending else f"{url}/{following}"
                )
                warnings.warn(
                    f"{error} (from {where}); trying the previous checkpoint {following_at}",
                    stacklevel=3,
                )
    raise CorruptCheckpointError(folder / names[0], "no readable checkpoint: " + "; ".join(errors))


def _load_downloaded(
    manager: CheckpointManager,
    state: Mapping[str, Any],
    fs: Any,
    remote_path: str,
    local: Path,
    options: dict[str, Any],
) -> LoadResult:
    """Download ``remote_path`` to ``local`` (an earlier copy of the same size is reused)
    and load it; a reused copy that fails its checksum is downloaded again first, as the
    damage may be in that copy only."""
    cached = local.is_file()
    _fetch(fs, remote_path, local)
    try:
        return manager.load(state, which=local, **options)
    except CorruptCheckpointError:
        if not cached:
            raise
        return manager.load(state, which=_fetch(fs, remote_path, local, reuse=False), **options)


def _unreadable_store(url: str, folder: Path, error: Exception) -> CheckpointError:
    """The error for a store that could not be listed, naming the local copies."""
    local = [name for _, name in _local_names(folder)]
    there = (
        f"The local copies in {str(folder)!r} ({', '.join(local[-3:])}"
        f"{', ...' if len(local) > 3 else ''}) can be loaded with CheckpointManager("
        f"{str(folder)!r}).load(state) or resume_from={str(folder)!r}."
        if local
        else f"There are no local copies in {str(folder)!r}."
    )
    return CheckpointError(
        f"could not read the checkpoints at {url}: {type(error).__name__}: {error}. Check "
        f"that the store is reachable and the credentials are valid, then try again. {there}"
    )


def write_remote_checkpoint(
    url: str,
    state: Mapping[str, Any],
    *,
    step: int = 0,
    epoch: int | None = None,
    metrics: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    local_dir: str | os.PathLike[str] | None = None,
    upload_attempts: int = 4,
) -> str:
    """Write one checkpoint file at ``url``, atomically; returns ``url``.

    The file is what :func:`~scramjet.checkpoint.write_checkpoint` writes (read back by
    :func:`load_remote` and ``trainer.load_checkpoint(url)``). It is staged in
    ``local_dir`` (default :func:`default_local_dir`), uploaded (retried with backoff),
    and the staged copy is removed.

    Args:
        url: The file's URL (``s3://bucket/run/last.pt``, ``gs://...``, ``file://...``).
        state: Entries to save, as for :meth:`CheckpointManager.save`.
        step: Optimizer step recorded in the file.
        epoch: Epoch recorded in the file.
        metrics: Metrics recorded in the file.
        storage_options: Passed to fsspec.
        local_dir: Where the staging copy is written.
        upload_attempts: Tries of the upload before giving up.

    Raises:
        ValueError: ``url`` has an unknown scheme or names no file.
        CheckpointWriteError: The upload failed after its retries. Whatever was at ``url``
            before is left as it was, and the complete file is kept in ``local_dir``
            (``path``; ``saved`` is True).
    """
    protocol = check_scheme(url)
    rest = url.split("://", 1)[1].strip("/")
    if url.endswith("/") or not rest or (protocol in _OBJECT_STORES and "/" not in rest):
        raise ValueError(
            f"a checkpoint URL names a file, such as 's3://bucket/run/last.pt'; received {url!r}"
        )
    fs, path = _open(url, storage_options)
    if protocol in _LOCAL_SCHEMES and "::" not in url:  # the local atomic write, in place
        write_checkpoint(path, state, step=step, epoch=epoch, metrics=metrics)
        return url
    folder = Path(local_dir) if local_dir is not None else default_local_dir(url)
    staged = folder / path.rsplit("/", 1)[-1]
    write_checkpoint(staged, state, step=step, epoch=epoch, metrics=metrics, fsync=False)
    error = _upload_file(fs, staged, path, protocol, upload_attempts)
    if error is not None:
        raise CheckpointWriteError(
            f"checkpoint {url} was not saved: the upload failed ({type(error).__name__}: "
            f"{error}). Whatever was at {url} before is unchanged. The complete file is kept "
            f"at {str(staged)!r}: copy it there, or save again once the store is reachable.",
            staged,
            saved=True,
        ) from error
    staged.unlink(missing_ok=True)
    return url


def _upload_file(
    fs: Any, local: Path, path: str, protocol: str, attempts: int
) -> BaseException | None:
    """Upload ``local`` to ``path`` so that ``path`` only ever holds a complete file; the
    last error if every attempt failed (an HTTP 4xx refusal is not tried again)."""
    from scramjet.tracking.storage import permanent_error

    last: BaseException | None = None
    for attempt in range(max(1, attempts)):
        if attempt:
            time.sleep(min(8.0, 0.5 * 2 ** (attempt - 1)))
        temporary = None
        try:
            if protocol in _OBJECT_STORES:  # visible only once complete
                fs.put_file(str(local), path)
            else:  # a temporary name next to the target, moved into place
                parent, _, name = path.rpartition("/")
                temporary = f"{parent}/.{name}.{uuid.uuid4().hex[:8]}.uploading"
                fs.put_file(str(local), temporary)
                fs.mv(temporary, path)
            return None
        except Exception as exc:
            last = exc
            if temporary is not None:  # tidying: the upload's error is the one reported
                with contextlib.suppress(Exception):
                    fs.rm_file(temporary)
            if permanent_error(exc) is not None or isinstance(exc, FileNotFoundError):
                break
    return last


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
        self._storage_options = storage_options
        folder = Path(local_dir) if local_dir is not None else default_local_dir(self.url)
        super().__init__(folder, on_saved=self._upload, **kwargs)
        self.storage = RunStorage(
            folder, self.url, storage_options, workers=1, max_attempts=upload_attempts
        )
        self.not_uploaded: dict[str, str] = {}  # file name -> last upload error
        self._protocol = check_scheme(self.url)
        self._deadline: float | None = None  # set by limit_uploads
        self._limit = 0.0
        # Names local rotation deleted: with keep_best, only these are deleted remotely.
        self._rotated_away: set[str] = set()
        listed: str | None = None  # why the listing failed
        try:
            remote = _remote_names(self.storage.fs, self.storage.remote_root)
        except Exception as error:  # listing failed: numbering follows the local folder
            listed = f"{type(error).__name__}: {error}"
            remote = []
        self._remote_highest = remote[-1][0] if remote else 0
        self._adopt_pending(remote, listed)

    def _adopt_pending(self, remote: list[tuple[int, str]], failure: str | None) -> None:
        """Local copies newer than the remote folder were saved by an earlier process whose
        upload failed or was cut short: keep them (rotation skips them) and upload them
        with the next save. When the store could not be listed (``failure``), which ones
        are there is unknown: every local copy is kept and uploaded again."""
        on_remote = {name for _, name in remote}
        pending = [
            name
            for seq, name in _local_names(self.directory)
            if seq > self._remote_highest and name not in on_remote
        ]
        if failure is not None:
            warnings.warn(
                f"could not list {self.url} ({failure}): numbering follows the local folder"
                + (
                    f", and its {len(pending)} checkpoint(s) are kept and uploaded again with "
                    "the next save, in case they are not on the store"
                    if pending
                    else ""
                ),
                RuntimeWarning,
                stacklevel=3,
            )
        for name in pending:
            self.not_uploaded[name] = (
                "not known to be on the store"
                if failure
                else "saved by an earlier process and not uploaded"
            )
        if pending and failure is None:
            warnings.warn(
                f"{len(pending)} checkpoint(s) in {str(self.directory)!r} are newer than "
                f"everything at {self.url}: an earlier process saved them but they were not "
                f"uploaded ({', '.join(pending)}). They are kept and uploaded with the next "
                "save.",
                RuntimeWarning,
                stacklevel=3,
            )

    def __repr__(self) -> str:
        return f"RemoteCheckpointManager({self.url!r}, local_dir={str(self.directory)!r})"

    def _scan(self) -> tuple[list[CheckpointInfo], int]:
        found, highest = super()._scan()
        return found, max(highest, self._remote_highest)

    # ----------------------------------------------------------------- reading

    def _newer_on_store(self) -> list[tuple[int, str]]:
        """The remote checkpoints newer than every local file, listed now (a fresh machine
        has none locally; another machine may have saved since)."""
        try:
            remote = _remote_names(self.storage.fs, self.storage.remote_root)
        except Exception as error:  # the store is down: the local copies are what there is
            warnings.warn(
                f"could not list {self.url} ({type(error).__name__}: {error}); reading the "
                f"local copies in {str(self.directory)!r} only",
                RuntimeWarning,
                stacklevel=4,
            )
            return []
        if remote:
            self._remote_highest = max(self._remote_highest, remote[-1][0])
        local = _local_names(self.directory)
        newest_local = local[-1][0] if local else 0
        return [(seq, name) for seq, name in remote if seq > newest_local]

    @property
    def latest_path(self) -> Path | None:
        """The newest checkpoint, here or on the store (downloaded into the local folder
        when the store has a newer one), or None if there is none anywhere."""
        self.wait()
        newer = self._newer_on_store()
        if not newer:
            return super().latest_path
        name = newer[-1][1]
        return _fetch(self.storage.fs, f"{self.storage.remote_root}/{name}", self.directory / name)

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
        """:meth:`CheckpointManager.load`; ``"latest"`` is the newest checkpoint here or on
        the store: one that only the store has (a fresh machine, another machine's save)
        is downloaded into the local folder first. ``"best"`` ranks the local copies."""
        options: dict[str, Any] = {"strict": strict, "scope": scope, "map_location": map_location}
        if which == "latest":
            self.wait()
            if self._newer_on_store():
                return load_remote(
                    self.url,
                    state or {},
                    local_dir=self.directory,
                    storage_options=self._storage_options,
                    fallback=fallback,
                    **options,
                )
        return super().load(state, which, fallback=fallback, **options)

    def _rotate(self, found: list[CheckpointInfo], *, background: bool = False) -> OSError | None:
        # A file that is not uploaded yet is never rotated away locally.
        kept = [c for c in found if c.path.name not in self.not_uploaded]
        keep = self._keep_seqs(kept)
        self._rotated_away.update(c.path.name for c in kept if c.seq not in keep)
        return super()._rotate(kept, background=background)

    def limit_uploads(self, seconds: float | None) -> None:
        """Stop waiting for uploads ``seconds`` from now, in all (None: no limit again).

        For the save at preemption (``SaveTrainingStateCallback`` calls it with
        :data:`PREEMPTION_UPLOAD_SECONDS`): the local write of a checkpoint is still
        waited for, as it is what the next run resumes from, but no upload, retry or
        remote rotation keeps :meth:`save`, :meth:`wait` or :meth:`close` past the limit,
        and no per-file warning is given: :meth:`close` names every checkpoint that is
        not uploaded. Those stay in the local folder; the next manager of this folder
        uploads them with its first save. An upload still running when the limit passes
        goes on in a daemon thread (it never keeps the process alive) and never leaves a
        partial file under a checkpoint's name.

        Raises:
            ValueError: ``seconds`` is negative or not a number.
        """
        if seconds is None:
            self._deadline = None
            return
        self._limit = upload_seconds(seconds, "limit_uploads takes", "or None for no limit")
        self._deadline = time.monotonic() + self._limit

    def _left(self) -> float | None:
        """Seconds left for uploads (None: no limit)."""
        return None if self._deadline is None else self._deadline - time.monotonic()

    def _waited(self, finished: Callable[[float], bool]) -> bool:
        """Call ``finished(timeout)`` in short slices until it returns True (then True) or
        the limit of :meth:`limit_uploads` passes (then False); the limit may be set while
        this waits."""
        while True:
            left = self._left()
            if left is not None and left <= 0:
                return False
            if finished(0.1 if left is None else min(0.1, left)):
                return True

    def _out_of_time(self, name: str) -> str:
        return (
            self.storage.errors.get(name)
            or self.not_uploaded.get(name)
            or f"no answer within {self._limit:g} s"
        )

    def _send(self, name: str) -> str | None:
        """Upload one local file; the error text if it failed after its retries, or if
        the limit of :meth:`limit_uploads` passed first."""
        left = self._left()
        if left is not None and left <= 0:
            return self._out_of_time(name)
        if self._protocol not in _OBJECT_STORES:
            return self._send_by_rename(name)
        self.storage.upload(name)  # a PUT: the object is visible only once complete
        if not self._waited(lambda timeout: self.storage.wait(timeout=timeout)):
            return self._out_of_time(name)
        return self.storage.errors.get(name) or self.storage.fatal

    def _send_by_rename(self, name: str) -> str | None:
        """Upload to a temporary name that is then moved into place (retried with
        backoff), on a daemon thread: an upload abandoned at the limit, or cut short by
        the end of the process, never leaves a partial file under a checkpoint's name."""
        outcome: list[BaseException | None] = []
        fs, root = self.storage.fs, self.storage.remote_root

        def put() -> None:
            with contextlib.suppress(Exception):  # there already, or the put reports it
                fs.makedirs(root, exist_ok=True)
            attempts = self.storage.max_attempts
            outcome.append(
                _upload_file(fs, self.directory / name, f"{root}/{name}", self._protocol, attempts)
            )

        thread = threading.Thread(target=put, name="scramjet-checkpoint-upload", daemon=True)
        thread.start()

        def finished(timeout: float) -> bool:
            thread.join(timeout)
            return bool(outcome)

        if not self._waited(finished):
            return self._out_of_time(name)
        error = outcome[0]
        return None if error is None else f"{type(error).__name__}: {error}"

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
            if self._deadline is None:  # under a limit, close() names them all at once
                warnings.warn(
                    f"checkpoint {name} was saved locally at {str(self.directory / name)!r} "
                    f"but not uploaded to {self.url}: {error}. The local copy is kept and the "
                    "upload is tried again after the next save.",
                    RuntimeWarning,
                    stacklevel=2,
                )
        if not self.not_uploaded:
            self._tidy_remote()

    def _tidy_remote(self) -> None:
        """Remote rotation, within the limit of :meth:`limit_uploads` if one is set (what
        it leaves is deleted after a later save)."""
        from scramjet.tracking.storage import call_with_deadline

        left = self._left()
        if left is None:
            self._remove_rotated_remote()
        elif left > 0:
            with contextlib.suppress(TimeoutError):
                call_with_deadline(self._remove_rotated_remote, timeout=left, name="rotation")

    def _remove_rotated_remote(self) -> None:
        if self.keep_last is None:
            return
        fs, root = self.storage.fs, self.storage.remote_root
        try:
            names = _remote_names(fs, root)
            for _, name in names[: max(0, len(names) - self.keep_last)]:
                if self.keep_best and name not in self._rotated_away:
                    continue  # among the best, or its metrics are unknown here: kept
                fs.rm_file(f"{root}/{name}")
                self._rotated_away.discard(name)
        except Exception as error:  # rotation is tidying: the next save tries again
            warnings.warn(f"could not rotate {self.url}: {error}", RuntimeWarning, stacklevel=2)

    def close(self) -> None:
        """Flush the write in flight, retry failed uploads, then free the buffers.

        Under :meth:`limit_uploads`, the retries stop at the limit.

        Raises:
            CheckpointWriteError: Checkpoints are still not uploaded (``saved`` is True:
                the local copies are complete; the message names them).
        """
        super().close()
        for name in sorted(self.not_uploaded):
            if not (self.directory / name).is_file() or self._send(name) is None:
                self.not_uploaded.pop(name, None)
        if self.not_uploaded:
            raise CheckpointWriteError(
                self._not_uploaded_message(),
                self.directory / max(self.not_uploaded),
                saved=True,
            )
        self._tidy_remote()

    def _not_uploaded_message(self) -> str:
        names = ", ".join(sorted(self.not_uploaded))
        last = self.not_uploaded[max(self.not_uploaded)]
        here = str(self.directory)
        if self._deadline is None:
            return (
                f"checkpoints {names} were saved in {here!r} but could not be uploaded to "
                f"{self.url} ({last}). They are complete and kept locally: copy them to the "
                "remote folder, or resume from the local folder."
            )
        return (
            f"checkpoints {names} were saved in {here!r} but not uploaded to {self.url}: the "
            f"uploads stopped after the {self._limit:g} s they are given at preemption "
            f"(last error: {last}). The local copies are complete and kept. A run restarted "
            f"on this machine with resume_from='auto' and the same local folder resumes from "
            "the newest of them and uploads them with its first save; a run on another "
            f"machine resumes from the newest checkpoint at {self.url}, an older one, unless "
            "they are copied there first."
        )


def _local_names(folder: Path) -> list[tuple[int, str]]:
    """``(seq, name)`` of the checkpoint files in a local folder, oldest first."""
    if not folder.is_dir():
        return []
    found = []
    for entry in os.scandir(folder):
        match = NAME_RE.match(entry.name)
        if match is not None and entry.is_file():
            found.append((int(match[1]), entry.name))
    return sorted(found)


def _seq(name: str) -> int:
    match = NAME_RE.match(name)
    return int(match[1]) if match else 0
