"""Checkpoints that survive crashes, restarts and rotation.

:class:`CheckpointManager` writes one file per checkpoint into a directory:

``ckpt-<seq>-step<step>.pt``
    ``seq`` is a sequence number that only grows (it is recovered from the directory
    when a new process starts, so a restart never overwrites an earlier file) and
    ``step`` is the training step. *Latest* means the highest ``seq``, never the newest
    modification time.
``index.json``
    Step, epoch and metrics of every checkpoint, replaced atomically after each save.
    It is only a cache: the directory listing decides which checkpoints exist and the
    file names give their ``seq`` and ``step``; an index entry that disagrees with its
    file name is ignored, and a checkpoint missing from the index has its metadata read
    back from the file itself.

Each file ends with a checksum trailer (``payload.py``), checked on every read: a damaged
file raises :class:`CorruptCheckpointError` and ``load("latest")`` falls back.

Writes go to a temporary file in the same directory (fsync-ed), then ``os.replace``
and a directory fsync: a process killed mid-save leaves at most a ``.tmp-*`` file,
ignored by readers and removed by the next save. Reads use
``torch.load(weights_only=True)``. One process writes to a directory (rank 0 in a
distributed run); every rank may read.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import torch
from torch import nn

from scramjet.checkpoint._map_location import MapLocation, maps_to_cpu
from scramjet.checkpoint._reading import _WRITERS, read_checkpoint
from scramjet.checkpoint._rotation import BestChecker, keep_seqs
from scramjet.checkpoint.background import BackgroundWriter, Snapshotter, register_for_exit
from scramjet.checkpoint.payload import (
    FORMAT_VERSION,
    CheckpointError,
    CheckpointMismatchError,
    CheckpointWriteError,
    CorruptCheckpointError,
    build_payload,
    check_count,
    describe_skipped,
    disk_full,
    format_keys,
    free_space,
    from_storable,
    is_stateful,
    load_module_state,
    unwrap,
    write_checked,
    write_checkpoint,
)
from scramjet.checkpoint.records import (
    INDEX,
    NAME_RE,
    CheckpointInfo,
    LoadResult,
    load_training_object,
    none_readable,
    ranked_best,
    read_index,
    read_ranking,
    recorded_classes,
    renamed_warning,
    write_index,
)
from scramjet.runtime.files import TMP_PREFIX, atomic_write, temporary_writer
from scramjet.runtime.processes import pid_alive

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "CheckpointMismatchError",
    "CheckpointWriteError",
    "CorruptCheckpointError",
    "LoadResult",
    "read_checkpoint",
    "write_checkpoint",
]


def _not_count(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


_WRITER_MARK = ".scramjet-writer"
"""``<pid> <host>`` of the process saving into a folder, written at its first save and
removed by its ``close()``: a manager created on that folder in another live process of
this machine is warned then, before its own saves rotate the other run's files away."""


def _other_writer(directory: Path) -> int | None:
    """The pid of another live process of this machine that saves into ``directory``."""
    try:
        pid_text, host = (directory / _WRITER_MARK).read_text(encoding="utf-8").split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    same_machine = host == socket.gethostname()
    return pid if same_machine and pid != os.getpid() and pid_alive(pid) else None


def _unlink_all(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


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
        async_write: ``save()`` copies the state into host memory and returns; a
            background thread writes, fsyncs, renames and rotates (one write at a time;
            the next ``save()`` waits for the previous write). ``False`` writes inside
            ``save()``. Either way a file, once it exists, is complete.
        on_saved: Called with the :class:`CheckpointInfo` of each checkpoint once it is
            durable and old ones are rotated away (on the writer thread when
            ``async_write``); e.g. to upload it. An exception in it is reported like a
            failed write.

    With ``async_write`` (the default), a checkpoint is durable once :meth:`wait`
    returns; every method that reads the directory (:meth:`load`, :meth:`checkpoints`,
    ``latest_path``, ``best_path``) waits for the write in flight first, also across
    managers of the same directory in this process. A failed background write raises
    :class:`CheckpointWriteError` from the next call. :meth:`close` (or leaving a
    ``with`` block) flushes, and writes still in flight when the interpreter exits are
    completed before it exits.

    Only one process may write into ``directory`` (in a distributed run, call
    :meth:`save` on rank 0 only, e.g. ``if is_main_process(): manager.save(...)``);
    every rank may call :meth:`load`. Other processes see a checkpoint once the
    writer's :meth:`wait` returned.

    Example:
        >>> import tempfile, torch
        >>> model = torch.nn.Linear(2, 1)
        >>> manager = CheckpointManager(tempfile.mkdtemp(), keep_last=2)
        >>> path = manager.save({"model": model, "note": "hello"}, step=10, epoch=1)
        >>> result = manager.load({"model": model})  # waits for the write in flight
        >>> result.step, result.values["note"]
        (10, 'hello')
        >>> manager.close()  # flush (also done when the interpreter exits)
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
        async_write: bool = True,
        on_saved: Callable[[CheckpointInfo], object] | None = None,
    ) -> None:
        if keep_last is not None and (_not_count(keep_last) or keep_last < 1):
            raise ValueError(
                f"keep_last must be a positive int or None (keep all), got {keep_last!r}; "
                "the latest checkpoint is always kept so that training can resume"
            )
        if _not_count(keep_best) or keep_best < 0:
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
        self.async_write = async_write
        self.on_saved = on_saved
        self._meta_cache: dict[str, CheckpointInfo] = {}
        self._reported: set[str] = set()  # names in the way, warned about once
        self._best_checker = BestChecker()  # a damaged best never costs a readable one
        self._deleter: threading.Thread | None = None
        self._writer = BackgroundWriter("scramjet-checkpoint-writer")
        self._snapshots = Snapshotter()
        if self.directory.exists() and not self.directory.is_dir():
            raise NotADirectoryError(
                f"CheckpointManager needs a directory for its checkpoint files, but "
                f"{str(self.directory)!r} is a file. Pass a folder (created if missing); to "
                "load one checkpoint file, use load(which=path) on a manager of another "
                "folder, or trainer.load_checkpoint(path)."
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = os.path.realpath(self.directory)
        self._claimed = False  # this manager wrote the folder's _WRITER_MARK
        other = _other_writer(self.directory)
        if other is not None:
            self._warn_other_writer(other, stacklevel=3)

    def _warn_other_writer(self, pid: int, *, stacklevel: int) -> None:
        self._reported.add(f"pid {pid}")
        warnings.warn(
            f"Another process (pid {pid}) is saving checkpoints into "
            f"{str(self.directory)!r}. Two runs in one folder number their checkpoints in "
            "one sequence, rotate away each other's, and a resume takes whichever is "
            "newest. Give each run its own folder.",
            RuntimeWarning,
            stacklevel=stacklevel + 1,
        )

    def _recreate_if_removed(self) -> None:
        """The folder deleted while in use (a cleanup script, a user): created again with
        one warning, so the run keeps saving; the checkpoints it held are gone."""
        if self.directory.is_dir():
            return
        known = len(self._meta_cache)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._meta_cache.clear()
        self._claimed = False
        warnings.warn(
            f"The checkpoint folder {str(self.directory)!r} was removed while in use, with "
            f"the {known} checkpoint(s) it held; it is created again and this checkpoint "
            "is saved into it. A resume can only use the checkpoints saved from now on; "
            "keep the folder while the run saves into it.",
            RuntimeWarning,
            stacklevel=3,
        )

    def _claim(self) -> None:
        """Record this process as the folder's writer (at the first save)."""
        text = f"{os.getpid()} {socket.gethostname()}".encode()
        atomic_write(self.directory / _WRITER_MARK, lambda file: file.write(text), fsync=False)
        self._claimed = True

    def _release(self) -> None:
        if self._claimed and _other_writer(self.directory) is None:
            with contextlib.suppress(OSError):  # ours (or a dead run's): the run ends here
                (self.directory / _WRITER_MARK).unlink()
        self._claimed = False

    def __repr__(self) -> str:
        return (
            f"CheckpointManager({str(self.directory)!r}, keep_last={self.keep_last}, "
            f"keep_best={self.keep_best}, monitor={self.monitor!r}, mode={self.mode!r}, "
            f"async_write={self.async_write})"
        )

    def __enter__(self) -> CheckpointManager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        try:  # flush, but never hide the error that left the block
            self.close()
        except CheckpointWriteError as error:
            warnings.warn(str(error), RuntimeWarning, stacklevel=2)

    # ----------------------------------------------------------------- listing

    def checkpoints(self) -> list[CheckpointInfo]:
        """All checkpoints in the directory, oldest (lowest ``seq``) first.

        Returns:
            One :class:`CheckpointInfo` per checkpoint file found by a directory scan
            (after the write in flight, if any, is done).
        """
        self.wait()
        return self._scan()[0]

    def _scan(self) -> tuple[list[CheckpointInfo], int]:
        """Checkpoint files oldest first, and the highest ``seq`` of any checkpoint name.

        ``seq``/``step`` come from the names; the index supplies epoch and metrics where
        it agrees with them. A non-file with a checkpoint name is reported and skipped.
        """
        index = self._read_index()
        found: list[CheckpointInfo] = []
        highest = 0
        for entry in os.scandir(self.directory):
            match = NAME_RE.match(entry.name)
            if match is None:
                continue
            seq, step = int(match[1]), int(match[2])
            highest = max(highest, seq)
            if not entry.is_file():
                self._report_in_the_way(entry.path)
                continue
            info = self._meta_cache.get(entry.name) or index.get(entry.name)
            if info is None or (info.seq, info.step) != (seq, step):
                info = self._read_meta(Path(entry.path), seq, step)
            self._meta_cache[entry.name] = info
            found.append(info)
        return sorted(found, key=lambda info: info.seq), highest

    def _report_in_the_way(self, path: str) -> None:
        if path in self._reported:
            return
        self._reported.add(path)
        warnings.warn(
            f"{path!r} has a checkpoint's name but is not a file (a directory?): it is "
            "ignored, and new checkpoints are numbered after it. Move it out of the "
            "checkpoint directory to silence this warning.",
            RuntimeWarning,
            stacklevel=4,
        )

    @property
    def latest_path(self) -> Path | None:
        """The most recently saved checkpoint (highest ``seq``), or None if there is none."""
        found = self.checkpoints()
        return found[-1].path if found else None

    @property
    def best_path(self) -> Path | None:
        """The checkpoint ``load(which="best")`` loads: the best by ``monitor`` that can be
        read, or None if none has that metric. A better one that is damaged is skipped with
        a warning, as ``load`` does (its checksum is checked and its tensors memory-mapped,
        not read). A manager made without ``monitor`` ranks by the one the folder's index
        records.

        Raises:
            CorruptCheckpointError: None of the ranked checkpoints can be read.
        """
        ranked = self._ranked_best(self.checkpoints(), self._recorded_ranking())
        if not ranked:
            return None
        return self._load_first_readable([c.path for c in ranked], True, "cpu", True)[1]

    def _recorded_ranking(self) -> tuple[str | None, str]:
        """``(monitor, mode)``: this manager's, else those its folder's index records."""
        if self.monitor:
            return self.monitor, self.mode
        monitor, mode = read_ranking(self.directory)
        return monitor, mode or self.mode

    def _ranked_best(
        self, found: list[CheckpointInfo], rule: tuple[str | None, str] | None = None
    ) -> list[CheckpointInfo]:
        key, mode = rule or (self.monitor, self.mode)
        return ranked_best(found, key, mode)

    # ----------------------------------------------------------------- saving

    def save(
        self,
        state: Mapping[str, Any],
        *,
        step: int,
        epoch: int | None = None,
        metrics: Mapping[str, Any] | None = None,
    ) -> Path:
        """Save a new checkpoint atomically, then rotate old ones.

        With ``async_write`` the state is copied (a consistent snapshot: the objects may
        change as soon as this returns) and written in the background; the file exists
        once :meth:`wait` returns, and any method that reads the directory waits for it.

        Args:
            state: Entries to save. Objects with ``state_dict()`` (modules, optimizers,
                schedulers, scalers, a TrainState) are saved through it; DDP and
                ``torch.compile`` wrappers are unwrapped so files load into plain models.
                Other values must be tensors, numpy arrays, numbers, strings, or
                lists/tuples/dicts of these.
            step: Training step (a non-negative int); it is encoded in the file name.
            epoch: Optional epoch number (a non-negative int).
            metrics: Optional ``{name: number}``; ``monitor`` ranks checkpoints by it.

        Returns:
            Path of the new checkpoint file.

        Raises:
            TypeError: A value cannot be stored safely (named in the message).
            ValueError: ``step`` or ``epoch`` is not a non-negative int.
            CheckpointWriteError: The previous background write failed (this checkpoint
                is then not saved).
        """
        step = check_count(step, "step")
        if epoch is not None:  # checked here: a file holding another type would not load
            epoch = check_count(epoch, "epoch", optional=True)
        self.wait()  # the previous write first: one in flight at most
        self._recreate_if_removed()
        if not self._claimed:
            self._claim()
        existing, highest = self._scan()
        self._remove_stale_temporaries()
        seq = highest + 1  # past every checkpoint name, files or not: never overwrite
        payload = build_payload(
            state, seq=seq, step=step, epoch=epoch, metrics=metrics, classes=True
        )
        info = CheckpointInfo(
            path=self.directory / f"ckpt-{seq:06d}-step{step}.pt",
            seq=seq,
            step=step,
            epoch=epoch,
            metrics=payload["metrics"],
        )
        if not self.async_write:
            self._write(info, lambda file: torch.save(payload, file), existing, background=False)
            return info.path
        # Only the snapshot is written: the live tensors are free to change after this.
        snapshot = self._snapshots.take(payload)

        def job() -> None:
            self._write(info, snapshot.write_to, existing, background=True)
            self._snapshots.give_back(snapshot.buffers)

        _WRITERS.setdefault(self._key, weakref.WeakSet()).add(self)
        register_for_exit(self)
        self._writer.submit(job, f"writing checkpoint {str(info.path)!r} in the background")
        return info.path

    def _write(
        self,
        info: CheckpointInfo,
        write: Callable[[Any], object],
        existing: list[CheckpointInfo],
        *,
        background: bool,
    ) -> None:
        # Temp file (checksummed as it is written), fsync, os.replace, directory fsync;
        # only then the index and rotation, so a failed or interrupted write never costs
        # an earlier checkpoint.
        write_checked(info.path, write, fsync=self.fsync)
        self._meta_cache[info.path.name] = info
        self._best_checker.written(info.path)
        index_error = self._rotate([*existing, info], background=background)
        if self.on_saved is not None:
            try:
                self.on_saved(info)
            except Exception as error:
                raise CheckpointWriteError(
                    f"checkpoint {str(info.path)!r} was saved, but on_saved raised "
                    f"{type(error).__name__}: {error}",
                    info.path,
                    saved=True,
                ) from error
        if index_error is not None:
            full = disk_full(index_error, None)
            raise CheckpointWriteError(
                f"checkpoint {str(info.path)!r} was saved and is complete, but "
                f"{str(self.directory / INDEX)!r} could not be updated: "
                f"{type(index_error).__name__}: {index_error}"
                + (f" ({free_space(self.directory)})" if full else "")
                + ". The index is only a cache: loading and rotation go by the file names, "
                "so no checkpoint is lost; the next save rewrites it. "
                + ("Free some disk space before the next save." if full else ""),
                info.path,
                saved=True,
            ) from index_error

    def _keep_seqs(self, found: list[CheckpointInfo]) -> set[int]:
        """The ``seq`` of every checkpoint rotation keeps: the last ``keep_last``, and the
        ``keep_best`` best by ``monitor`` that can be read."""
        ranked = self._ranked_best(found)
        return keep_seqs(found, self.keep_last, self.keep_best, ranked, self._best_checker)

    def _rotate(self, found: list[CheckpointInfo], *, background: bool = False) -> OSError | None:
        """Delete what no longer needs keeping; return the error of the index write, if any
        (deletion goes ahead: the new checkpoint is durable, the index only a cache)."""
        keep = self._keep_seqs(found)
        kept = [c for c in found if c.seq in keep]
        doomed = [c.path for c in found if c.seq not in keep]
        for path in doomed:
            self._meta_cache.pop(path.name, None)
            self._best_checker.forget(path)
        index_error: OSError | None = None
        try:
            self._write_index(kept)
        except OSError as error:
            index_error = error
        if doomed and background:
            _unlink_all(doomed)
        elif doomed:
            # Unlinking a 200 MB file costs ~70 ms on ext4: do it off the training thread.
            # Not a daemon thread, so it completes before the interpreter exits.
            self._deleter = threading.Thread(target=_unlink_all, args=(doomed,))
            self._deleter.start()
        return index_error

    @property
    def pending(self) -> bool:
        """Whether a background write is still in flight."""
        return self._writer.busy

    def wait(self) -> None:
        """Block until the write in flight is durable and rotated files are deleted.

        Raises:
            CheckpointWriteError: A background write failed since the last call (raised
                once; the failed checkpoint does not exist, earlier ones are intact).
        """
        self._writer.join()
        if self._deleter is not None:
            self._deleter.join()
            self._deleter = None
        for other in list(_WRITERS.get(self._key, ())):
            if other is not self:  # another manager of this directory in this process
                other._writer.join()
        failure = self._writer.take_error()
        if failure is not None:
            error, what = failure
            if isinstance(error, CheckpointWriteError):
                raise error  # already says which file and what happened to it
            if not self.directory.is_dir():
                raise CheckpointWriteError(
                    f"{what} failed: {type(error).__name__}: {error}. The folder "
                    f"{str(self.directory)!r} was removed while in use, with the earlier "
                    "checkpoints in it; the next save creates it again."
                ) from error
            raise CheckpointWriteError(
                f"{what} failed: {type(error).__name__}: {error}. That checkpoint was not "
                f"saved; the earlier checkpoints in {str(self.directory)!r} are intact. Fix "
                "the cause (disk space, permissions) and save again; async_write=False "
                "reports such errors from save() itself."
            ) from error

    def close(self) -> None:
        """Flush the write in flight (see :meth:`wait`) and free the snapshot buffers.

        The manager stays usable; a later :meth:`save` allocates buffers again.
        """
        try:
            self.wait()
        finally:
            self._release()
            self._snapshots.release()
            writers = _WRITERS.get(self._key)
            if writers is not None:  # nothing in flight: readers need not wait for it
                writers.discard(self)
                if not writers:  # a sweep of many runs leaves no entry per folder behind
                    del _WRITERS[self._key]

    # ----------------------------------------------------------------- index

    def _write_index(self, kept: list[CheckpointInfo]) -> None:
        # A manager without a monitor keeps the rule the folder records (which='best').
        # "best" names an intact file: a damaged one (checked once per version of the
        # file) is skipped with a warning, as load(which="best") skips it.
        monitor, mode = self._recorded_ranking()
        write_index(
            self.directory,
            kept,
            monitor=monitor,
            mode=mode,
            version=FORMAT_VERSION,
            readable=lambda info: self._best_checker.intact_best(info, monitor),
        )

    def _read_index(self) -> dict[str, CheckpointInfo]:
        return read_index(self.directory)

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
        # Left behind by a writer killed mid-save; never a valid checkpoint. Only the
        # writer removes them, in save() (a reader might delete a file in flight), and only
        # those no live process of this machine is writing.
        for entry in os.scandir(self.directory):
            if not (entry.name.startswith(TMP_PREFIX) and entry.is_file()):
                continue
            writer = temporary_writer(entry.path)
            if writer is None:
                Path(entry.path).unlink(missing_ok=True)
            elif writer != os.getpid() and f"pid {writer}" not in self._reported:
                self._warn_other_writer(writer, stacklevel=4)

    # ----------------------------------------------------------------- loading

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
            CheckpointWriteError: A background write of this manager failed.
        """
        self.wait()  # a checkpoint saved in the background is visible here
        candidates = self._candidates(which)
        payload, path = self._load_first_readable(
            candidates, fallback and not self._is_path(which), map_location, which == "best"
        )
        renamed = None if self._is_path(which) else renamed_warning(path, payload)
        if renamed is not None:
            warnings.warn(renamed, stacklevel=2)
        return self._restore(dict(state or {}), payload, path, strict=strict, scope=scope)

    @staticmethod
    def _is_path(which: str | os.PathLike[str]) -> bool:
        return not (isinstance(which, str) and which in ("latest", "best"))

    def _candidates(self, which: str | os.PathLike[str]) -> list[Path]:
        if self._is_path(which):
            path = Path(which)
            if path.is_dir():
                raise FileNotFoundError(
                    f"which={str(path)!r} is a folder; which= takes 'latest', 'best' or the "
                    "path of one checkpoint file. For the newest checkpoint of that folder use "
                    f"CheckpointManager({str(path)!r}).load(state, which='latest')"
                )
            if not path.is_file():
                here = self.directory / path
                hint = f"; did you mean {str(here)!r}?" if here.is_file() else ""
                raise FileNotFoundError(
                    f"checkpoint file {str(path)!r} does not exist (which= takes 'latest', "
                    f"'best' or the path of a checkpoint file){hint}"
                )
            return [path]
        found = self.checkpoints()
        if which == "best":
            rule = self._recorded_ranking()
            if not rule[0]:
                raise ValueError(
                    f"which='best' needs a metric to rank by, and neither this manager nor "
                    f"the index of {str(self.directory)!r} names one: pass "
                    f"CheckpointManager(directory, monitor='<metric name>', mode='min')"
                )
            ranked = self._ranked_best(found, rule)
            if not ranked:
                nan = sum(rule[0] in c.metrics for c in found)
                others = sorted({k for c in found for k in c.metrics} - {rule[0]})
                raise FileNotFoundError(
                    f"no checkpoint in {str(self.directory)!r} has a value of metric "
                    f"{rule[0]!r} to rank by"
                    + (f" ({nan} checkpoint(s) recorded it as NaN)" if nan else "")
                    + (f"; the checkpoints record {others}" if others else "")
                    + ". Pass metrics={...} with that name to save(), or load which='latest'."
                )
            return [c.path for c in ranked]
        if not found:
            raise FileNotFoundError(
                f"no checkpoint in {str(self.directory)!r}; check `manager.latest_path is not "
                "None` before resuming"
            )
        return [c.path for c in reversed(found)]

    def _load_first_readable(
        self, candidates: list[Path], fallback: bool, map_location: MapLocation, best: bool
    ) -> tuple[dict[str, Any], Path]:
        # Memory-map on CPU: modules copy straight from the page cache, once; every other
        # tensor is cloned in _restore so nothing keeps the file mapped afterwards.
        mmap = maps_to_cpu(map_location)
        errors: list[CorruptCheckpointError] = []
        for i, path in enumerate(candidates):
            try:
                self._bring(path)
                return read_checkpoint(path, map_location=map_location, mmap=mmap), path
            except CorruptCheckpointError as error:
                errors.append(error)
                if not fallback:
                    raise
                if i + 1 < len(candidates):
                    then = "next best" if best else "previous"
                    warnings.warn(
                        f"{error}; trying the {then} checkpoint {str(candidates[i + 1])!r}",
                        stacklevel=3,
                    )
        raise none_readable(candidates, errors)

    def _bring(self, path: Path) -> None:
        """Make ``path`` readable before it is read (a remote manager downloads it)."""

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
        kinds = recorded_classes(payload)
        targets = {
            name: obj
            for name, obj in ((name, unwrap(target)) for name, target in state.items())
            # plain values are returned; a scope restores modules only
            if is_stateful(obj) and (scope is None or isinstance(obj, nn.Module))
        }
        # A strict load checks every entry before it changes any: a refusal leaves the
        # model, optimizer and scheduler as they were, not half restored.
        for check_only in (True, False) if strict else (False,):
            for name, obj in targets.items():
                if name not in saved:
                    self._missing_entry(name, saved, path, strict, result)
                elif isinstance(obj, nn.Module):
                    skipped = load_module_state(
                        name, obj, saved[name], scope, strict, path, check_only=check_only
                    )
                    if not check_only:
                        result.record_skipped(name, skipped)
                        restored.add(name)
                else:
                    values = saved[name] if check_only else from_storable(saved[name], copy=True)
                    lacking = load_training_object(
                        name,
                        obj,
                        values,
                        strict,
                        path,
                        check_only=check_only,
                        saved_class=kinds.get(name),
                    )
                    if lacking and not check_only:  # strict=False: left as it was
                        result.missing_keys[name] = lacking
                    restored.add(name)
        # One call: views across entries stay views, as torch.load returns them.
        result.values = from_storable({k: v for k, v in saved.items() if k not in restored}, True)
        if not result.clean:
            warnings.warn(describe_skipped(result), stacklevel=3)
        return result

    @staticmethod
    def _missing_entry(
        name: str, saved: Mapping[str, Any], path: Path, strict: bool, result: LoadResult
    ) -> None:
        if strict:
            raise CheckpointMismatchError(
                f"checkpoint {str(path)!r} has no entry {name!r}; it has: "
                f"{format_keys(sorted(saved))}. Pass strict=False to skip it."
            )
        result.missing_keys[name] = ["<whole entry>"]
