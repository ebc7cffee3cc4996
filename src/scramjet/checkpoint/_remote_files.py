"""Remote checkpoints without a manager: URL helpers, listing, reading, one-file writes.

Private: :mod:`scramjet.checkpoint.remote` re-exports the public names.

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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scramjet.checkpoint._map_location import MapLocation
from scramjet.checkpoint.manager import (
    CheckpointError,
    CheckpointManager,
    CheckpointWriteError,
    CorruptCheckpointError,
)
from scramjet.checkpoint.payload import write_checkpoint
from scramjet.checkpoint.records import NAME_RE, LoadResult
from scramjet.runtime.files import atomic_write

if TYPE_CHECKING:
    from scramjet.tracking.storage import StorageTimeouts

# Stores where an upload becomes visible only once complete (a PUT, a multi-part upload).
_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})
_LOCAL_SCHEMES = frozenset({"file", "local"})


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


def _open(
    url: str, storage_options: Mapping[str, Any] | None, timeouts: StorageTimeouts | None = None
) -> tuple[Any, str]:
    from scramjet.tracking.storage import StorageTimeouts, open_filesystem, with_default_timeouts

    check_scheme(url)
    options = with_default_timeouts(url, storage_options, timeouts or StorageTimeouts())
    return open_filesystem(url.rstrip("/"), options)


def _remote_names(fs: Any, root: str) -> list[tuple[int, str]]:
    """``(seq, name)`` of the checkpoint files under ``root``, oldest first."""
    return _list_store(fs, root)[0]


def _list_store(fs: Any, root: str) -> tuple[list[tuple[int, str]], list[str]]:
    """``(seq, name)`` of the checkpoint files under ``root``, oldest first, and the names of
    the temporary files of checkpoint uploads there (``.<checkpoint>.<8 hex>.uploading``)."""
    try:
        entries = fs.ls(root, detail=False)
    except FileNotFoundError:
        return [], []
    found, temporary = [], []
    for entry in entries:
        name = str(entry).rstrip("/").rsplit("/", 1)[-1]
        match = NAME_RE.match(name)
        if match is not None:
            found.append((int(match[1]), name))
        elif (upload := _TEMPORARY_RE.match(name)) and NAME_RE.match(upload["name"]):
            temporary.append(name)
    return sorted(found), sorted(temporary)


def _bounds(timeouts: StorageTimeouts | None) -> StorageTimeouts:
    from scramjet.tracking.storage import StorageTimeouts

    return timeouts or StorageTimeouts()


def _read(bounds: StorageTimeouts, what: str, fn: Any, *args: Any, extra: float = 0.0) -> Any:
    """``fn(*args)`` within ``bounds.call`` (+ ``extra``) seconds: a read of the store never
    waits without a bound (gcsfs and other backends have no timeout of their own)."""
    from scramjet.tracking.storage import call_with_deadline

    return call_with_deadline(fn, *args, timeout=bounds.call + extra, name=what)


def has_checkpoints(
    location: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    timeouts: StorageTimeouts | None = None,
) -> bool:
    """Whether a local folder or a remote URL holds at least one checkpoint file.

    The listing of a URL gets ``timeouts.call`` seconds (default :class:`StorageTimeouts()
    <scramjet.tracking.storage.StorageTimeouts>`); a store that does not answer by then
    raises ``TimeoutError``.
    """
    if is_url(location):
        fs, root = _open(str(location), storage_options, timeouts)
        what = f"the listing of {location}"
        return bool(_read(_bounds(timeouts), what, _remote_names, fs, root))
    folder = Path(location)
    if folder.is_file():
        return True
    if not folder.is_dir():
        return False
    with os.scandir(folder) as entries:  # any() stops early: the listing is closed here
        return any(NAME_RE.match(e.name) for e in entries)


def _fetch(
    fs: Any, remote: str, local: Path, *, reuse: bool = True, timeouts: StorageTimeouts | None
) -> Path:
    """Download ``remote`` to ``local`` atomically (with ``reuse``, a local file of the
    same size is kept: right for names that are never reused, such as rotation's), within
    ``call + size / min_rate`` seconds; ``CheckpointError`` if the store takes longer."""
    bounds = _bounds(timeouts)
    try:
        size = int(_read(bounds, f"the size of {remote}", fs.size, remote))
        if reuse and local.is_file() and local.stat().st_size == size:
            return local
        local.parent.mkdir(parents=True, exist_ok=True)

        def copy(file: Any) -> None:
            with fs.open(remote, "rb") as source:
                for block in iter(lambda: source.read(1 << 22), b""):
                    file.write(block)

        def download() -> None:
            atomic_write(local, copy, fsync=False)

        _read(bounds, f"the download of {remote}", download, extra=size / bounds.min_rate)
    except TimeoutError as error:
        raise CheckpointError(
            f"could not download the checkpoint {remote}: {error} (StorageTimeouts: "
            f"call={bounds.call:g} s, min_rate={bounds.min_rate:g} B/s). Check that the "
            f"store is reachable and try again; pass timeouts=StorageTimeouts(...) for a "
            f"slower link."
        ) from error
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
    map_location: MapLocation = "cpu",
    timeouts: StorageTimeouts | None = None,
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
        timeouts: Bounds on the waits for the store (default :class:`StorageTimeouts()
            <scramjet.tracking.storage.StorageTimeouts>`): each listing gets ``call``
            seconds, a download ``call + size / min_rate``.

    Raises:
        FileNotFoundError: Nothing to load at ``url``.
        CorruptCheckpointError: No candidate passed its checksum.
        CheckpointError: The store could not be listed or a download did not finish in time.
    """
    fs, root = _open(url, storage_options, timeouts)
    folder = Path(local_dir) if local_dir is not None else default_local_dir(url)
    manager = CheckpointManager(folder, keep_last=None)
    options: dict[str, Any] = {"strict": strict, "scope": scope, "map_location": map_location}
    try:
        bounds, what = _bounds(timeouts), f"the listing of {url}"
        one_file = _read(bounds, what, fs.isfile, root)
        remote = [] if one_file else _read(bounds, what, _remote_names, fs, root)
    except Exception as error:  # unreachable store, refused credentials, no answer...
        raise _unreadable_store(url, folder, error) from error
    if one_file:
        name = root.rsplit("/", 1)[-1]
        local = _fetch(fs, root, folder / name, reuse=False, timeouts=timeouts)
        return manager.load(state, which=local, **options)
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
    found = _Candidates(url, fs, root, folder, candidates, set(pending), timeouts)
    return _load_first_good(manager, state, found, options)


@dataclass(frozen=True)
class _Candidates:
    """The checkpoints :func:`load_remote` may load, newest first; ``pending`` are local
    copies newer than the store, the others are downloaded from ``root`` on ``fs``."""

    url: str
    fs: Any
    root: str
    folder: Path
    names: list[str]
    pending: set[str]
    timeouts: StorageTimeouts | None = None

    def where(self, name: str) -> str:
        return str(self.folder / name) if name in self.pending else f"{self.url}/{name}"


def _load_first_good(
    manager: CheckpointManager,
    state: Mapping[str, Any],
    found: _Candidates,
    options: dict[str, Any],
) -> LoadResult:
    """Load the first of ``found`` that passes its checksum, warning for each skipped one.

    Raises:
        CorruptCheckpointError: None did (the message gives every checksum error).
    """
    errors = []
    for i, name in enumerate(found.names):
        only_local = name in found.pending
        if only_local:
            warnings.warn(
                f"checkpoint {name} in {str(found.folder)!r} is newer than everything at "
                f"{found.url}: it was saved but not uploaded; resuming from this local copy "
                "(a RemoteCheckpointManager of this folder uploads it with its next save)",
                stacklevel=4,
            )
        local = found.folder / name
        try:
            if only_local:
                return manager.load(state, which=local, **options)
            remote = f"{found.root}/{name}"
            return _load_downloaded(manager, state, found, remote, local, options)
        except CorruptCheckpointError as error:
            errors.append(str(error))
            if not only_local:
                local.unlink(missing_ok=True)  # never reuse a damaged download
            if i + 1 < len(found.names):
                warnings.warn(
                    f"{error} (from {found.where(name)}); trying the previous checkpoint "
                    f"{found.where(found.names[i + 1])}",
                    stacklevel=4,
                )
    newest = found.folder / found.names[0]  # a local copy when the store has none
    raise CorruptCheckpointError(newest, "no readable checkpoint: " + "; ".join(errors))


def _load_downloaded(
    manager: CheckpointManager,
    state: Mapping[str, Any],
    found: _Candidates,
    remote_path: str,
    local: Path,
    options: dict[str, Any],
) -> LoadResult:
    """Download ``remote_path`` to ``local`` (an earlier copy of the same size is reused)
    and load it; a reused copy that fails its checksum is downloaded again first, as the
    damage may be in that copy only."""
    cached, fs, timeouts = local.is_file(), found.fs, found.timeouts
    _fetch(fs, remote_path, local, timeouts=timeouts)
    try:
        return manager.load(state, which=local, **options)
    except CorruptCheckpointError:
        if not cached:
            raise
        again = _fetch(fs, remote_path, local, reuse=False, timeouts=timeouts)
        return manager.load(state, which=again, **options)


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
    timeouts: StorageTimeouts | None = None,
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
        timeouts: Bounds on the waits for the store (default :class:`StorageTimeouts()
            <scramjet.tracking.storage.StorageTimeouts>`): botocore's for ``s3://``; on
            stores that are not object stores, each put may take ``call + size /
            min_rate`` seconds and each move or delete ``call`` seconds, and one that
            takes longer is a failed try.

    Raises:
        ValueError: ``url`` has an unknown scheme or names no file.
        CheckpointWriteError: The upload failed after its retries. Whatever was at ``url``
            before is left as it was, and the complete file is kept in ``local_dir``
            (``path``; ``saved`` is True).
    """
    protocol = _file_url_protocol(url)
    fs, path = _open(url, storage_options, timeouts)
    if protocol in _LOCAL_SCHEMES and "::" not in url:  # the local atomic write, in place
        write_checkpoint(path, state, step=step, epoch=epoch, metrics=metrics)
        return url
    folder = Path(local_dir) if local_dir is not None else default_local_dir(url)
    staged = folder / path.rsplit("/", 1)[-1]
    write_checkpoint(staged, state, step=step, epoch=epoch, metrics=metrics, fsync=False)
    error = _upload_file(fs, staged, path, protocol, upload_attempts, timeouts)
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


def _file_url_protocol(url: str) -> str:
    """The protocol of ``url``, a URL that names a file (a ValueError otherwise)."""
    protocol = check_scheme(url)
    rest = url.split("://", 1)[1].strip("/")
    if url.endswith("/") or not rest or (protocol in _OBJECT_STORES and "/" not in rest):
        raise ValueError(
            f"a checkpoint URL names a file, such as 's3://bucket/run/last.pt'; received {url!r}"
        )
    return protocol


def _upload_file(
    fs: Any,
    local: Path,
    path: str,
    protocol: str,
    attempts: int,
    timeouts: StorageTimeouts | None = None,
) -> BaseException | None:
    """Upload ``local`` to ``path`` so that ``path`` only ever holds a complete file; the
    last error if every attempt failed (an HTTP 4xx refusal is not tried again). On a
    store that is not an object store every call has a deadline (see :func:`_put_by_rename`);
    one that passes it is a failed attempt."""
    from scramjet.tracking.storage import StorageTimeouts, permanent_error

    bounds = timeouts or StorageTimeouts()
    last: BaseException | None = None
    for attempt in range(max(1, attempts)):
        if attempt:
            time.sleep(min(8.0, 0.5 * 2 ** (attempt - 1)))
        try:
            if protocol in _OBJECT_STORES:  # visible only once complete
                fs.put_file(str(local), path)
            else:
                _put_by_rename(fs, local, path, bounds)
            return None
        except Exception as exc:
            last = exc
            if permanent_error(exc) is not None or isinstance(exc, FileNotFoundError):
                break
    return last


_IN_FLIGHT: dict[str, int] = {}
"""Temporary names (``.<name>.<8 hex>.uploading``) of this process's uploads that are not
over: how many of the upload and its put thread still use each."""
_IN_FLIGHT_LOCK = threading.Lock()


def _in_flight(temporary: str, change: int = 0) -> bool:
    """Add ``change`` users to ``temporary`` (forgotten at none); whether it is in use."""
    with _IN_FLIGHT_LOCK:
        users = _IN_FLIGHT.get(temporary, 0) + change
        if users > 0:
            _IN_FLIGHT[temporary] = users
        else:
            _IN_FLIGHT.pop(temporary, None)
        return users > 0


_TEMPORARY_RE = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{8}\.uploading$")


def _put_by_rename(fs: Any, local: Path, path: str, bounds: StorageTimeouts) -> None:
    """Put ``local`` under a temporary name next to ``path``, then move it into place.

    The put may take ``bounds.call + size / bounds.min_rate`` seconds, the move and the
    removal of the temporary file after a failure ``bounds.call`` each: a call that takes
    longer raises ``TimeoutError`` and is abandoned on a daemon thread. An abandoned put
    removes its temporary file itself when it ends, so only a process that exits first
    leaves one behind (the next manager of the store removes it).
    """
    from scramjet.tracking.storage import call_with_deadline

    parent, _, name = path.rpartition("/")
    temporary = f"{parent}/.{name}.{uuid.uuid4().hex[:8]}.uploading"
    abandoned = threading.Event()

    def put() -> None:
        try:
            fs.put_file(str(local), temporary)
        finally:
            if abandoned.is_set():  # nobody waits for it any more: tidy up behind it
                with contextlib.suppress(Exception):
                    fs.rm_file(temporary)
            _in_flight(temporary, -1)

    size = local.stat().st_size
    _in_flight(temporary, +2)  # this upload and its put thread
    try:
        try:
            call_with_deadline(
                put, timeout=bounds.call + size / bounds.min_rate, name=f"the upload of {name}"
            )
        finally:
            abandoned.set()  # from now on the put removes its file when it ends
        call_with_deadline(fs.mv, temporary, path, timeout=bounds.call, name=f"the move of {name}")
    except Exception:
        with contextlib.suppress(Exception):  # tidying: the upload's error is the one reported
            call_with_deadline(fs.rm_file, temporary, timeout=bounds.call, name="the removal")
        raise
    finally:
        _in_flight(temporary, -1)


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
