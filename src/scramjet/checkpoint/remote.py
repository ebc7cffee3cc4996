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
- No call to the store waits without a bound: each listing, move or delete gets
  ``timeouts.call`` seconds and each upload ``call + size / min_rate`` (see
  :class:`~scramjet.tracking.storage.StorageTimeouts`), and none goes past the limit of
  :meth:`RemoteCheckpointManager.limit_uploads`; ``upload_limit`` sets that limit from the
  construction, whose listing of the store it then bounds (the manager opened by the save
  at preemption). A call that takes longer is a failed try.
- Temporary upload files that an earlier process left on the store are removed with the
  remote rotation; those of this process's uploads still running are left alone.

Reading (:func:`load_remote`), the URL helpers and the one-file write
(:func:`write_remote_checkpoint`) live in :mod:`scramjet.checkpoint._remote_files` and are
re-exported here.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from scramjet.checkpoint._map_location import MapLocation
from scramjet.checkpoint._remote_files import (
    _OBJECT_STORES,
    _fetch,
    _in_flight,
    _list_store,
    _local_names,
    _remote_names,
    _seq,
    _upload_file,
    check_scheme,
    default_local_dir,
    has_checkpoints,
    is_url,
    load_remote,
    write_remote_checkpoint,
)
from scramjet.checkpoint._remote_index import (
    StoreIndex,
    complete_store_index,
    publish_store_index,
    read_store_index,
)
from scramjet.checkpoint._store_rotation import StoreBestChecker
from scramjet.checkpoint.manager import (
    CheckpointManager,
    CheckpointWriteError,
    CorruptCheckpointError,
)
from scramjet.checkpoint.records import CheckpointInfo, LoadResult

if TYPE_CHECKING:
    from scramjet.tracking.storage import StorageTimeouts

T = TypeVar("T")

__all__ = [
    "RemoteCheckpointManager",
    "check_scheme",
    "default_local_dir",
    "has_checkpoints",
    "is_url",
    "load_remote",
    "write_remote_checkpoint",
]

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


class RemoteCheckpointManager(CheckpointManager):
    """A :class:`CheckpointManager` whose files are also uploaded to ``url``.

    Args:
        url: Remote folder (``s3://bucket/run/checkpoints``, any fsspec URL).
        local_dir: Local folder of the copies (default :func:`default_local_dir`).
        storage_options: Passed to fsspec (credentials, ``client_kwargs``...).
        upload_attempts: Tries per upload (with backoff) before it waits for the next save.
        upload_limit: :meth:`limit_uploads` from the start, the listing of the store at
            construction included (for a manager opened by the save at preemption).
        timeouts: Bounds on the waits for the store (``storage.timeouts``; default
            :class:`~scramjet.tracking.storage.StorageTimeouts`): every listing, move or
            delete may take ``call`` seconds and an upload ``call + size / min_rate``
            (botocore's connect and read timeouts too, for ``s3://``); a call that takes
            longer is a failed try. Under a limit, no call goes past it.
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
        upload_limit: float | None = None,
        timeouts: StorageTimeouts | None = None,
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
        self._deadline: float | None = None  # set by limit_uploads
        self._limit = 0.0
        if upload_limit is not None:  # from the start: the listing below is bounded too
            self._limit = upload_seconds(upload_limit, "upload_limit must be", "or None")
            self._deadline = time.monotonic() + self._limit
        folder = Path(local_dir) if local_dir is not None else default_local_dir(self.url)
        super().__init__(folder, on_saved=self._upload, **kwargs)
        self.storage = RunStorage(
            folder,
            self.url,
            storage_options,
            workers=1,
            max_attempts=upload_attempts,
            timeouts=timeouts,
        )
        self._store_checker = StoreBestChecker(
            self.storage.fs, self.storage.remote_root, self.url, self.storage.timeouts
        )
        self.not_uploaded: dict[str, str] = {}  # file name -> last upload error
        self._late_uploads = False  # uploaded after the rotation that followed their save
        self._protocol = check_scheme(self.url)
        # Names local rotation deleted: with keep_best, only these are deleted remotely.
        self._rotated_away: set[str] = set()
        listed: str | None = None  # why the listing failed
        # Temporary files of uploads on the store now: an earlier process's leftovers
        # (removed with the remote rotation), unless this process is writing them.
        self._leftovers: set[str] = set()
        self._store_index: StoreIndex | None = None  # read from the store when needed
        try:
            remote, leftovers = self._bounded(
                f"the listing of {self.url}",
                _list_store,
                self.storage.fs,
                self.storage.remote_root,
            )
            self._leftovers.update(leftovers)
        except Exception as error:  # failed or timed out: numbering follows the local folder
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
        from scramjet.tracking.storage import call_with_deadline

        fs, root = self.storage.fs, self.storage.remote_root
        try:  # reading: bounded by the call timeout, whatever the limit of the uploads
            remote = call_with_deadline(
                _remote_names, fs, root, timeout=self.storage.timeouts.call, name="the listing"
            )
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
        remote = f"{self.storage.remote_root}/{name}"
        return _fetch(
            self.storage.fs, remote, self.directory / name, timeouts=self.storage.timeouts
        )

    def load(
        self,
        state: Mapping[str, Any] | None = None,
        which: str | os.PathLike[str] = "latest",
        *,
        strict: bool = True,
        scope: str | None = None,
        fallback: bool = True,
        map_location: MapLocation = "cpu",
    ) -> LoadResult:
        """:meth:`CheckpointManager.load`; ``"latest"`` is the newest checkpoint here or on
        the store: one that only the store has (a fresh machine, another machine's save)
        is downloaded into the local folder first. ``"best"`` ranks the local copies and
        those the store's index names, and downloads the best if only the store has it."""
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
                    timeouts=self.storage.timeouts,
                    **options,
                )
        return super().load(state, which, fallback=fallback, **options)

    @property
    def best_path(self) -> Path | None:
        """The checkpoint ``load(which="best")`` loads: the best here or on the store that
        can be read (downloaded into the local folder when only the store has it). A
        better one that is damaged or cannot be downloaded is skipped with a warning, as
        ``load`` does; None if none has the metric.

        Raises:
            CorruptCheckpointError: None of the ranked checkpoints can be read.
        """
        self.wait()
        ranked = [c.path for c in self._best_ranking()]
        if not ranked:
            return None
        return self._load_first_readable(ranked, True, "cpu", True)[1]

    def _recorded_ranking(self) -> tuple[str | None, str]:
        """This manager's ranking rule, else the local index's, else the store's index's."""
        monitor, mode = super()._recorded_ranking()
        stored = self._store_index
        if monitor or stored is None or not stored.monitor:
            return monitor, mode
        return stored.monitor, stored.mode or mode

    def _best_ranking(self) -> list[CheckpointInfo]:
        """The checkpoints here and on the store, best first (what ranks: those with the
        metric). The store's index supplies the stored ones; a checkpoint it lacks (no
        index, a damaged one, a save whose index update failed) is read from its own
        metadata, and the completed index is written back."""
        from scramjet.tracking.storage import call_with_deadline

        fs, root, bounds = self.storage.fs, self.storage.remote_root, self.storage.timeouts
        local = {c.path.name: c for c in self._scan()[0]}
        try:  # reading: bounded by the call timeout, whatever the limit of the uploads
            listed = call_with_deadline(
                _remote_names, fs, root, timeout=bounds.call, name="the listing"
            )
            self._store_index = index = read_store_index(fs, root, self.directory, bounds)
            names = [name for _, name in listed]
            on_store = [name for name in names if name not in local]
            if complete_store_index(fs, root, index, on_store, self.directory, bounds):
                self._update_store_index([(0, n) for n in names])
            stored = [index.entries[name] for name in on_store]
        except Exception as error:  # the store is down: the local copies are what there is
            warnings.warn(
                f"could not read the checkpoints at {self.url} ({type(error).__name__}: "
                f"{error}); ranking the local copies in {str(self.directory)!r} only",
                RuntimeWarning,
                stacklevel=4,
            )
            stored = []
        return self._ranked_best([*local.values(), *stored], self._recorded_ranking())

    def _candidates(self, which: str | os.PathLike[str]) -> list[Path]:
        if which != "best":
            return super()._candidates(which)
        ranked = self._best_ranking()  # downloaded in turn by _bring when they are read
        return [c.path for c in ranked] if ranked else super()._candidates(which)

    def _bring(self, path: Path) -> None:
        """Download ``path`` from the store when only the store has it."""
        if path.is_file():
            return
        fs, root = self.storage.fs, self.storage.remote_root
        try:
            _fetch(fs, f"{root}/{path.name}", path, timeouts=self.storage.timeouts)
        except Exception as error:  # gone from the store, or it does not answer in time
            raise CorruptCheckpointError(
                path,
                f"it could not be downloaded from {self.url} ({type(error).__name__}: {error})",
            ) from error

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

    def _bounded(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, a call to the store (``what`` names it), within ``storage.timeouts.call`` seconds and
        the limit of :meth:`limit_uploads`; ``TimeoutError`` after that (the call is
        abandoned on a daemon thread)."""
        from scramjet.tracking.storage import call_with_deadline

        timeout = self.storage.timeouts.call
        left = self._left()
        if left is not None:
            if left <= 0:
                raise TimeoutError(f"the {self._limit:g} s given to the uploads have passed")
            timeout = min(timeout, left)
        return call_with_deadline(fn, *args, timeout=timeout, name=what)

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
        from scramjet.tracking.storage import call_with_deadline

        outcome: list[BaseException | None] = []
        fs, root, bounds = self.storage.fs, self.storage.remote_root, self.storage.timeouts

        def put() -> None:
            with contextlib.suppress(Exception):  # there already, or the put reports it
                call_with_deadline(
                    functools.partial(fs.makedirs, root, exist_ok=True), timeout=bounds.call
                )
            local, attempts = self.directory / name, self.storage.max_attempts
            outcome.append(
                _upload_file(fs, local, f"{root}/{name}", self._protocol, attempts, bounds)
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
        late = len(self.not_uploaded)
        for name in [*sorted(self.not_uploaded), info.path.name]:
            if not (self.directory / name).is_file():
                self.not_uploaded.pop(name, None)
                continue
            error = self._send(name)
            if error is None:
                self.not_uploaded.pop(name, None)
                self._remote_highest = max(self._remote_highest, _seq(name))
                if self.keep_best and self.keep_last is not None:  # checked as written
                    self._store_checker.uploaded(name)
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
        self._late_uploads |= len(self.not_uploaded) < late
        if not self.not_uploaded:
            self._tidy_remote()

    def _tidy_remote(self) -> None:
        """Remote rotation, within the limit of :meth:`limit_uploads` if one is set (what
        it leaves is deleted after a later save)."""
        from scramjet.tracking.storage import call_with_deadline

        left = self._left()
        if left is None:
            self._update_store_index(self._remove_rotated_remote())
        elif left > 0:
            with contextlib.suppress(TimeoutError):
                kept = call_with_deadline(
                    self._remove_rotated_remote, timeout=left, name="rotation"
                )
                left = max(0.0, self._left() or 0.0)
                call_with_deadline(self._update_store_index, kept, timeout=left, name="the index")

    def _remove_rotated_remote(self) -> list[tuple[int, str]] | None:
        """Remove the store's rotated checkpoints; the ones left there when it listed them
        (None when it did not list: no ``keep_last``, or the store failed)."""
        fs, root = self.storage.fs, self.storage.remote_root
        try:
            for name in sorted(self._leftovers):
                if not _in_flight(f"{root}/{name}"):  # this process's own are left alone
                    with contextlib.suppress(FileNotFoundError):
                        self._bounded(f"the removal of {name}", fs.rm_file, f"{root}/{name}")
                self._leftovers.discard(name)
            if self.keep_last is None:
                return None
            names = self._bounded(f"the listing of {self.url}", _remote_names, fs, root)
            kept = names[max(0, len(names) - self.keep_last) :]
            known, best = self._ranked_on_store(names) if self.keep_best else (set(), set())
            for entry in names[: max(0, len(names) - self.keep_last)]:
                name = entry[1]
                if self.keep_best and name not in self._rotated_away and name not in known:
                    kept.append(entry)  # its metrics are unknown here
                    continue
                if name in best:
                    kept.append(entry)
                    continue
                self._bounded(f"the removal of {name}", fs.rm_file, f"{root}/{name}")
                self._rotated_away.discard(name)
            return kept
        except Exception as error:  # rotation is tidying: the next save tries again
            warnings.warn(f"could not rotate {self.url}: {error}", RuntimeWarning, stacklevel=2)
            return None

    def _ranked_on_store(self, names: list[tuple[int, str]]) -> tuple[set[str], set[str]]:
        """Of the checkpoints ``names`` on the store: those whose metrics are known (local
        copies, the store's index: earlier machines' saves), and the ``keep_best`` best of
        the run, ranked with the local copies."""
        if self._store_index is None:
            what, fs, root = f"the index of {self.url}", self.storage.fs, self.storage.remote_root
            args = (fs, root, self.directory, self.storage.timeouts)
            self._store_index = self._bounded(what, read_store_index, *args)
        local = {c.path.name: c for c in self._scan()[0]}
        on_store = {name for _, name in names}
        stored = {n: e for n, e in self._store_index.entries.items() if n in on_store}
        infos = {**stored, **local}
        ranked = self._ranked_best(list(infos.values()))
        best = {c.path.name for c in ranked[: self.keep_best]}
        older = {name for _, name in names[: max(0, len(names) - (self.keep_last or 0))]}
        if older - best - {n for n in older if n not in infos and n not in self._rotated_away}:
            best = self._readable_best(ranked, set(local))  # it deletes: check the best
        return set(infos) & on_store, best

    def _readable_best(self, ranked: list[CheckpointInfo], local: set[str]) -> set[str]:
        """The names of the first ``keep_best`` of ``ranked`` that can be read: a local
        copy is checked here, a checkpoint only the store holds on the store."""
        best: set[str] = set()
        for info in ranked:
            if len(best) == self.keep_best:
                break
            if info.path.name not in local:
                good = self._store_checker.readable(info, self.keep_best)
            else:
                good = self._best_checker.readable(info, self.keep_best)
                if good:
                    self._repair_stored(info.path.name)
            if good:
                best.add(info.path.name)
        return best

    def _repair_stored(self, name: str) -> None:
        """Upload the readable local copy ``name`` again when the store's copy is damaged."""
        reason = self._store_checker.damage(name)
        if reason is None:
            return
        fs, root, bounds = self.storage.fs, self.storage.remote_root, self.storage.timeouts
        local, attempts = self.directory / name, self.storage.max_attempts
        failed = _upload_file(fs, local, f"{root}/{name}", self._protocol, attempts, bounds)
        error = None if failed is None else f"{type(failed).__name__}: {failed}"
        if error is None:
            self._store_checker.uploaded(name)
        warnings.warn(
            f"{reason}. It ranks among the keep_best={self.keep_best} best checkpoints; "
            + (
                f"its readable local copy {str(self.directory / name)!r} was uploaded again"
                if error is None
                else f"uploading its readable local copy again failed: {error}"
            ),
            UserWarning,
            stacklevel=2,
        )

    def _update_store_index(self, names: list[tuple[int, str]] | None = None) -> None:
        """Rewrite the store's index for the checkpoints on the store (``names``, as the
        rotation just left them, else listed now): what this machine knows of each, else
        what the store's index said (another machine's saves)."""
        fs, root, bounds = self.storage.fs, self.storage.remote_root, self.storage.timeouts
        try:
            if names is None:
                names = self._bounded(f"the listing of {self.url}", _remote_names, fs, root)
            if self._store_index is None:
                what = f"the index of {self.url}"
                args = (fs, root, self.directory, bounds)
                self._store_index = self._bounded(what, read_store_index, *args)
            local = {c.path.name: c for c in self._scan()[0]}
            known = {**self._store_index.entries, **local}
            monitor, mode = self._recorded_ranking()
            index = StoreIndex({n: known[n] for _, n in names if n in known}, monitor, mode)
            error = publish_store_index(
                fs,
                root,
                index,
                protocol=self._protocol,
                attempts=self.storage.max_attempts,
                timeouts=bounds,
            )
            if error is not None:
                raise error
            self._store_index = index
        except Exception as error:  # a cache: the next save writes it again
            warnings.warn(
                f"could not update the index at {self.url} ({type(error).__name__}: {error}); "
                "which='best' on another machine ranks what it last recorded",
                RuntimeWarning,
                stacklevel=2,
            )

    def close(self) -> None:
        """Flush the write in flight, retry failed uploads, then free the buffers.

        Under :meth:`limit_uploads`, the retries stop at the limit.

        Raises:
            CheckpointWriteError: Checkpoints are still not uploaded (``saved`` is True:
                the local copies are complete; the message names them).
        """
        super().close()
        late = len(self.not_uploaded)
        for name in sorted(self.not_uploaded):
            if not (self.directory / name).is_file() or self._send(name) is None:
                self.not_uploaded.pop(name, None)
        if self._late_uploads or len(self.not_uploaded) < late:
            # The rotation after their save had to keep the checkpoints uploaded late: the
            # next save would rotate them away, but after the last save none comes.
            self._late_uploads = False
            self._rotate(self._scan()[0], background=True)  # the index is a cache
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
