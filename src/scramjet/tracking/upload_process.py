"""Uploads in a separate process, so they never compete with training for the GIL.

:class:`RunStorage` uploads from threads of the training process. Its work (request
signing, XML parsing, hashing in s3fs/botocore) is Python code that holds the GIL, and
the training loop of a small model is Python code too: the two take turns.
:class:`ProcessRunStorage` starts a child process (a fresh interpreter: nothing of the
training process is forked, and unlike multiprocessing's ``spawn`` the launching script is
not imported again) that builds a :class:`RunStorage` with the same arguments and serves
commands from a pipe. :meth:`ProcessRunStorage.upload` hands the relative path to a sender
thread and returns at once (the training loop never writes to the pipe itself, so a child
that is busy or stalled cannot block it; a path already waiting to be sent is not queued
twice); :meth:`~ProcessRunStorage.wait`, :meth:`~ProcessRunStorage.finish` and
:meth:`~ProcessRunStorage.verify` are round trips. The child inherits the environment
(``AWS_*`` variables, ``AWS_ENDPOINT_URL``, profiles) of the moment it starts.

The child ends after ``close()``. It never outlives the training process: a watchdog
thread in the child compares ``os.getppid()`` with the training process's pid every
``_WATCHDOG_S`` seconds and ends the child at once when they differ (the training process
was killed) or when the command pipe closes without a goodbye. A training process that
exits normally (interpreter exit, without ``close()``) says goodbye first (``atexit``): the
child then finishes the uploads already queued, for at most ``StorageTimeouts.final``
seconds, and exits. A watchdog rather than ``prctl(PR_SET_PDEATHSIG)``: the death signal
fires when the *thread* that started the child ends (an Experiment opened from a worker
thread would lose its uploader mid-run), it cannot tell a crash from a normal exit, and it
is Linux-only; a pipe's end of file alone is not enough either, since processes forked
from the training process (DataLoader workers) inherit its end and keep it open.
If the child dies, no call waits for it: :meth:`~ProcessRunStorage.finish` returns a
failed :class:`UploadReport` that says so (local files are only read, to list them with
their hashes), and later uploads are dropped. :func:`open_storage` picks the variant and
falls back to the in-process engine, with one warning, when the options cannot be sent
to a child or the child cannot start.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from scramjet.tracking._interrupts import raise_lost_ctrl_c
from scramjet.tracking.storage import (
    RunStorage,
    StorageCheckError,
    StorageTimeouts,
    UploadReport,
    check_upload_settings,
    list_local_files,
    unchecked_entry,
)

logger = logging.getLogger(__name__)

_POLL_S = 0.2  # how often a waiting call checks that the child is still alive
_LOCAL_PROTOCOLS = ("file", "local")


_SENDER_DONE = object()  # tells the sender thread to end
_EXIT_FLUSH_S = 10.0  # at interpreter exit, how long queued messages may take to reach the child
_WATCHDOG_S = 0.2  # how often the child checks that the training process is alive
_REPLY_MARGIN_S = 5.0  # beyond the child's own bound, how long a round trip may take


class _ChildGone(Exception):
    """The upload process is not running any more."""


# The child is a fresh interpreter running only this bootstrap: unlike multiprocessing's
# "spawn", it does not import the launching script (a training script without an
# ``if __name__ == "__main__":`` guard would otherwise run again in the child).
_BOOTSTRAP = (
    "import signal, sys\n"
    "from multiprocessing.connection import Connection\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "commands, replies = Connection(int(sys.argv[1])), Connection(int(sys.argv[2]))\n"
    "sys.path[:] = commands.recv()\n"
    "from scramjet.tracking.upload_process import _serve\n"
    "_serve(commands, replies, int(sys.argv[3]))\n"
)


class _Watchdog:
    """Child side: ends this process as soon as the training process is gone, unless the
    training process said goodbye (a normal exit), which leaves the queued uploads to
    finish."""

    def __init__(self, parent: int) -> None:
        self.parent = parent
        self.goodbye = False
        self.grace = StorageTimeouts().final  # after a goodbye: the longest the queue may take
        threading.Thread(target=self._watch, name="scramjet-parent-watchdog", daemon=True).start()

    def parent_gone(self) -> bool:
        return os.getppid() != self.parent

    def _watch(self) -> None:
        while not self.parent_gone():
            time.sleep(_WATCHDOG_S)
        if self.goodbye:  # a normal exit: the serve loop ends by itself within the grace
            time.sleep(self.grace)
        os._exit(0)  # killed training process: nothing of this run is waited for

    def orphaned(self) -> None:
        """The command pipe closed: finish the queued uploads after a goodbye, else end."""
        if not self.goodbye:
            os._exit(0)


def _serve(commands: Connection, replies: Connection, parent: int | None = None) -> None:
    """Child process: one RunStorage, commands from ``commands``, answers to ``replies``.

    Ends on ``close``; at once when the training process ``parent`` dies; after the queued
    uploads (bounded by ``StorageTimeouts.final``) when it exits after a goodbye. Ctrl-C is
    left to the training process.
    """
    watchdog = _Watchdog(os.getppid() if parent is None else parent)
    local_dir, url, storage_options, options = commands.recv()
    try:
        store = RunStorage(local_dir, url, storage_options, **options)
    except StorageCheckError as exc:  # the remote cannot be written: said once, as it is
        replies.send(("refused", 0, str(exc), {}, 0))
        return
    except BaseException as exc:
        replies.send(("error", 0, f"{type(exc).__name__}: {exc}", {}, 0))
        return
    watchdog.grace = store.timeouts.final
    replies.send(("ready", 0, os.getpid(), {}, 0))
    try:
        while True:
            try:
                message = commands.recv()
            except (EOFError, OSError):
                watchdog.orphaned()  # ends here unless the training process said goodbye
                store.wait(timeout=store.timeouts.final)
                os._exit(0)  # uploads still stuck after the wait are abandoned
            kind = message[0]
            if kind == "upload":
                store.upload(message[1])
            elif kind == "goodbye":
                watchdog.goodbye = True
            elif kind == "close":
                return
            else:
                replies.send(_answer(store, kind, message[1], message[2:]))
    finally:
        store.close(timeout=store.timeouts.final)


def _answer(store: RunStorage, kind: str, seq: int, args: tuple[Any, ...]) -> tuple[Any, ...]:
    try:
        result: Any = None
        if kind == "wait":
            result = store.wait(args[0])
        elif kind == "finish":
            result = store.finish(**args[0])
        elif kind == "verify":
            result = store.verify(args[0])
        else:
            raise ValueError(f"unknown command {kind!r}")
        status = "ok"
    except Exception as exc:
        status, result = "raise", f"{type(exc).__name__}: {exc}"
    return (status, seq, result, dict(store.errors), store.failed_attempts)


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class ProcessRunStorage:
    """:class:`RunStorage` run in a child process; same arguments, same answers.

    Args:
        local_dir: the run folder.
        url: remote folder (any fsspec URL).
        storage_options: passed to fsspec in the child; must be picklable.
        workers: upload threads (in the child).
        max_attempts: tries per queued upload before it is left to the final sync.
        backoff: first retry delay in seconds; doubled after each failure.
        max_backoff: longest delay between two tries.
        timeouts: bounds on network waits (see :class:`~scramjet.tracking.storage.StorageTimeouts`);
            every round trip to the child is bounded by them too.
        start_timeout: seconds to wait for the child to build its client.
        check: the child checks that the remote can be written before it reports ready.

    Raises:
        StorageCheckError: ``check`` found that the remote cannot be written.
        TypeError: ``storage_options`` cannot be pickled.
        RuntimeError: the child could not start or could not open the storage (the
            message holds its error).
    """

    def __init__(
        self,
        local_dir: str | os.PathLike[str],
        url: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        workers: int = 2,
        max_attempts: int = 6,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
        timeouts: StorageTimeouts | None = None,
        start_timeout: float = 120.0,
        check: bool = False,
    ) -> None:
        check_upload_settings(workers, max_attempts)
        self.local_dir = Path(local_dir)
        self.url = url.rstrip("/")
        self.timeouts = timeouts or StorageTimeouts()
        options = dict(storage_options or {})
        try:
            pickle.dumps(options)
        except Exception as exc:
            raise TypeError(
                f"storage_options must be picklable to reach the upload process; "
                f"{type(exc).__name__}: {exc}. Pass plain values (strings, numbers, dicts) "
                f"or use upload_process=False."
            ) from exc
        self.errors: dict[str, str] = {}
        self.failed_attempts = 0
        self._lock = threading.Lock()  # one round trip at a time
        # Messages to the child go through a sender thread, in order, so that no caller
        # (above all the training loop) ever blocks on a full pipe.
        self._outbox: collections.deque[Any] = collections.deque()
        self._queued_paths: set[str] = set()  # uploads in the outbox, not yet sent
        self._outbox_ready = threading.Condition()
        self._sender: threading.Thread | None = None
        self._sending = False  # the sender thread holds a message it is writing
        self._seq = 0
        self._dead: str | None = None
        self._hung = ""  # why the child was ended for not answering, if it was
        self._closed = False
        settings = dict(
            workers=workers,
            max_attempts=max_attempts,
            backoff=backoff,
            max_backoff=max_backoff,
            timeouts=self.timeouts,
            check=check,
        )
        self._process, self._commands, self._replies = self._launch()
        try:
            self._commands.send(list(sys.path))
            self._commands.send((str(self.local_dir), self.url, options, settings))
            self._await_ready(start_timeout)
        except (RuntimeError, OSError) as exc:  # StorageCheckError included
            self._stop(timeout=5)
            if isinstance(exc, OSError):
                raise RuntimeError(f"the upload process could not start: {exc}") from exc
            raise
        self._sender = threading.Thread(
            target=self._send_loop, name="scramjet-pipe-sender", daemon=True
        )
        self._sender.start()
        _LIVE.add(self)

    @staticmethod
    def _launch() -> tuple[subprocess.Popen[bytes], Connection, Connection]:
        cmd_read, cmd_write = os.pipe()
        reply_read, reply_write = os.pipe()
        try:
            args = [str(cmd_read), str(reply_write), str(os.getpid())]
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, *args],
                pass_fds=(cmd_read, reply_write),
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            for fd in (cmd_read, cmd_write, reply_read, reply_write):
                os.close(fd)
            raise
        os.close(cmd_read)  # the child's ends: a dead child gives EOF / a broken pipe
        os.close(reply_write)
        return (
            process,
            Connection(cmd_write, readable=False),
            Connection(reply_read, writable=False),
        )

    @property
    def pid(self) -> int | None:
        """Process id of the upload process."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        """Whether the upload process is running."""
        return self._dead is None and self._process.poll() is None

    def _send(self, message: Any) -> None:
        """Queue ``message`` for the sender thread (or send it now before it runs)."""
        if self._sender is None:
            self._commands.send(message)
            return
        with self._outbox_ready:
            if message is not _SENDER_DONE and message[0] == "upload":
                if message[1] in self._queued_paths:
                    return  # the queued message uploads the file's newest content anyway
                self._queued_paths.add(message[1])
            self._outbox.append(message)
            self._outbox_ready.notify_all()

    def _drain(self, timeout: float) -> bool:
        """Wait until every queued message was written to the pipe; False on timeout."""
        with self._outbox_ready:
            return self._outbox_ready.wait_for(
                lambda: not self._outbox and not self._sending, timeout
            )

    def _send_loop(self) -> None:
        """Sender thread: writes queued messages to the child, in order."""
        while True:
            with self._outbox_ready:
                while not self._outbox:
                    self._outbox_ready.wait()
                message = self._outbox.popleft()
                if message is _SENDER_DONE:
                    self._outbox_ready.notify_all()
                    return
                if message[0] == "upload":
                    self._queued_paths.discard(message[1])
                self._sending = True
            try:
                self._commands.send(message)
            except OSError:  # the child is gone: the next round trip finds out and says so
                with self._outbox_ready:
                    self._outbox.clear()
                    self._queued_paths.clear()
                    self._sending = False
                    self._outbox_ready.notify_all()
                return
            with self._outbox_ready:
                self._sending = False
                self._outbox_ready.notify_all()
            if message[0] == "close":
                return

    def _receive(self) -> tuple[Any, ...] | None:
        """The next answer, or None if none came within the poll interval.

        Raises:
            _ChildGone: the child closed its end (it exited).
        """
        try:
            if not self._replies.poll(_POLL_S):
                return None
            reply: tuple[Any, ...] = self._replies.recv()
            return reply
        except (EOFError, OSError):
            raise _ChildGone from None

    def _await_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                reply = self._receive()
            except _ChildGone:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(5)
                code = _exit_text(self._process.returncode)
                raise RuntimeError(f"the upload process ended while starting ({code})") from None
            if reply is None:
                continue
            if reply[0] == "ready":
                return
            if reply[0] == "refused":
                raise StorageCheckError(reply[2])
            raise RuntimeError(f"the upload process could not open {self.url}: {reply[2]}")
        raise RuntimeError(f"the upload process did not start within {timeout:.0f} s")

    # ----------------------------------------------------------------- commands
    def upload(self, rel_path: str | os.PathLike[str]) -> None:
        """Send a relative path to the upload process; returns at once.

        The child coalesces a path queued again before its upload started. After the
        child died, paths are dropped (the final report lists them as not checked).
        """
        if self._closed or self._dead is not None:
            return
        self._send(("upload", Path(rel_path).as_posix()))

    def _request(self, kind: str, *args: Any, timeout: float | None = None) -> Any:
        """One round trip; a child that does not answer within ``timeout`` seconds is
        ended (it is stuck: its own calls are bounded) and reported as gone."""
        with self._lock:
            if self._dead is not None or self._closed:
                raise _ChildGone
            self._seq += 1
            seq = self._seq
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                self._send((kind, seq, *args))
                while True:
                    reply = self._receive()
                    raise_lost_ctrl_c()
                    if reply is None:
                        if self._process.poll() is not None:
                            raise _ChildGone
                        if deadline is not None and time.monotonic() > deadline:
                            self._process.kill()
                            self._hung = f"it did not answer {kind}() within {timeout:.0f} s"
                            raise _ChildGone
                        continue
                    status, got, result, errors, failed = reply
                    if got == seq:  # else: an answer to an earlier call that gave up
                        break
            except (_ChildGone, OSError):
                self._mark_dead()
                raise _ChildGone from None
            self.errors, self.failed_attempts = errors, failed
            if status == "raise":
                raise RuntimeError(f"the upload process failed in {kind}(): {result}")
            return result

    def _mark_dead(self) -> None:
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:  # its pipe broke but it still runs: end it
            self._process.kill()
            self._process.wait(5)
        why = self._hung or _exit_text(self._process.returncode)
        self._dead = f"the upload process ended unexpectedly ({why}, pid {self._process.pid})"
        self.errors["(upload process)"] = self._dead
        logger.warning("%s; later uploads are skipped, local files are untouched", self._dead)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every queued upload is done (see :meth:`RunStorage.wait`); returns
        at once (False) if the child died."""
        try:
            bound = None if timeout is None else timeout + _REPLY_MARGIN_S
            done: bool = self._request("wait", timeout, timeout=bound)
            return done
        except _ChildGone:
            return False

    def verify(self, rel: str) -> dict[str, Any]:
        """Check one file on the remote (see :meth:`RunStorage.verify`)."""
        try:
            size = (self.local_dir / rel).stat().st_size
            bound = 3 * self.timeouts.call + size / self.timeouts.min_rate + _REPLY_MARGIN_S
            info: dict[str, Any] = self._request("verify", rel, timeout=bound)
            return info
        except _ChildGone:
            return self._unchecked(rel)

    def finish(
        self,
        *,
        rounds: int = 3,
        exclude: Callable[[str], bool] | None = None,
        timeout: float | None = None,
    ) -> UploadReport:
        """Wait for uploads, sync what is missing, verify everything (in the child).

        Args:
            rounds: how many sync-and-verify passes before giving up on a file.
            exclude: relative paths for which this returns True are not mirrored; it is
                sent to the child, so it must be picklable (a module-level function).
            timeout: return within this many seconds (default ``timeouts.final``); a
                child that has not answered a few seconds later is ended.

        Returns:
            The child's :class:`UploadReport`, or a failed one naming the reason when
            the child is not running. Local files are never modified.
        """
        try:
            pickle.dumps(exclude)
        except Exception as exc:
            raise TypeError(
                f"exclude must be picklable (a module-level function) to reach the upload "
                f"process; received {exclude!r} ({type(exc).__name__}: {exc})."
            ) from exc
        try:
            budget = self.timeouts.final if timeout is None else timeout
            report: UploadReport = self._request(
                "finish",
                {"rounds": rounds, "exclude": exclude, "timeout": budget},
                timeout=budget + _REPLY_MARGIN_S,
            )
            return report
        except _ChildGone:
            return self._failed_report(exclude)

    def _unchecked(self, rel: str) -> dict[str, Any]:
        return unchecked_entry(self.local_dir / rel, self._dead or "upload process closed")

    def _failed_report(self, exclude: Callable[[str], bool] | None) -> UploadReport:
        files = {
            rel: self._unchecked(rel)
            for rel in list_local_files(self.local_dir)
            if not (exclude and exclude(rel))
        }
        return UploadReport(
            ok=False,
            files=files,
            failures=sorted(files),
            remote=self.url,
            failed_attempts=self.failed_attempts,
            error=self._dead or "the upload process was closed",
        )

    # ----------------------------------------------------------------- closing
    def close(self) -> None:
        """Let the child finish what is queued (for at most ``timeouts.final`` seconds,
        or a few seconds after :meth:`finish`), then end it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop(timeout=self.timeouts.final + _REPLY_MARGIN_S)

    def _stop(self, timeout: float) -> None:
        if self._process.poll() is None:
            with contextlib.suppress(OSError):
                self._send(("close",))
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning("the upload process did not stop within %.0f s; ending it", timeout)
                self._process.kill()
                self._process.wait(5)
        if self._sender is not None:  # the child is gone: its pipe no longer blocks a send
            self._send(_SENDER_DONE)
            self._sender.join(5)
        self._commands.close()
        self._replies.close()


_LIVE: weakref.WeakSet[ProcessRunStorage] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    """Hand what is still queued to the upload processes before this interpreter ends.

    The children finish those uploads by themselves after the training process is gone;
    a child that does not read its pipe holds exit up for at most ``_EXIT_FLUSH_S``.
    """
    deadline = time.monotonic() + _EXIT_FLUSH_S
    for store in list(_LIVE):
        if store.alive:
            store._send(("goodbye",))  # a normal exit: the child may finish the queue
            store._drain(max(0.0, deadline - time.monotonic()))


def wants_process(url: str) -> bool:
    """Whether :func:`open_storage` uses a process by default: every non-local URL."""
    protocol = url.split("://", 1)[0].lower() if "://" in url else "file"
    return protocol not in _LOCAL_PROTOCOLS


def open_storage(
    local_dir: str | os.PathLike[str],
    url: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    process: bool | None = None,
    **kwargs: Any,
) -> RunStorage | ProcessRunStorage:
    """The storage engine for a run: in a child process or in threads of this one.

    Args:
        local_dir: the run folder.
        url: remote folder (any fsspec URL).
        storage_options: passed to fsspec.
        process: True: a :class:`ProcessRunStorage`; False: a :class:`RunStorage`;
            None: a process for remote URLs, threads for ``file://`` and local paths.
        **kwargs: ``workers``, ``max_attempts``, ``backoff``, ``max_backoff``, ``timeouts``,
            ``check``.

    Returns:
        The engine. When a process was asked for but the options cannot be pickled or
        the child cannot start, a :class:`RunStorage` (after one ``RuntimeWarning``).

    Raises:
        StorageCheckError: ``check=True`` and the remote cannot be written (never
            retried in threads: the answer would be the same).
    """
    if process is None:
        process = wants_process(url)
    if process:
        try:
            return ProcessRunStorage(local_dir, url, storage_options, **kwargs)
        except StorageCheckError:
            raise
        except (TypeError, RuntimeError, OSError) as exc:
            warnings.warn(
                f"Uploads to {url} run in threads of the training process instead of a "
                f"separate upload process: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
    return RunStorage(local_dir, url, storage_options, **kwargs)


__all__ = ["ProcessRunStorage", "open_storage", "wants_process"]
