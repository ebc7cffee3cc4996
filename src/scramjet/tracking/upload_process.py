"""Uploads in a separate process, so they never compete with training for the GIL.

:class:`RunStorage` uploads from threads of the training process. Its work (request
signing, XML parsing, hashing in s3fs/botocore) is Python code that holds the GIL, and
the training loop of a small model is Python code too: the two take turns.
:class:`ProcessRunStorage` starts a child process (``spawn``: nothing of the training
process is forked) that builds a :class:`RunStorage` with the same arguments and serves
commands from a queue. :meth:`ProcessRunStorage.upload` sends only the relative path and
returns at once; :meth:`~ProcessRunStorage.wait`, :meth:`~ProcessRunStorage.finish` and
:meth:`~ProcessRunStorage.verify` are round trips. The child inherits the environment
(``AWS_*`` variables, ``AWS_ENDPOINT_URL``, profiles) of the moment it starts.

If the child dies, no call waits for it: :meth:`~ProcessRunStorage.finish` returns a
failed :class:`UploadReport` that says so (local files are only read, to list them with
their hashes), and later uploads are dropped. :func:`open_storage` picks the variant and
falls back to the in-process engine, with one warning, when the options cannot be sent
to a child or the child cannot start.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scramjet.tracking.storage import RunStorage, UploadReport, file_sha256

logger = logging.getLogger(__name__)

_POLL_S = 0.2  # how often a waiting call checks that the child is still alive
_LOCAL_PROTOCOLS = ("file", "local")


class _ChildGone(Exception):
    """The upload process is not running any more."""


def _serve(
    local_dir: str,
    url: str,
    storage_options: Mapping[str, Any] | None,
    options: dict[str, Any],
    commands: Any,
    replies: Any,
) -> None:
    """Child process: one RunStorage, commands from ``commands``, answers to ``replies``."""
    try:
        store = RunStorage(local_dir, url, storage_options, **options)
    except BaseException as exc:
        replies.put(("error", 0, f"{type(exc).__name__}: {exc}", {}, 0))
        return
    replies.put(("ready", 0, os.getpid(), {}, 0))
    parent = multiprocessing.parent_process()
    try:
        while True:
            try:
                message = commands.get(timeout=1.0)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    return  # the training process is gone: stop after what is queued
                continue
            kind = message[0]
            if kind == "upload":
                store.upload(message[1])
            elif kind == "close":
                return
            else:
                replies.put(_answer(store, kind, message[1], message[2:]))
    finally:
        store.close()


def _answer(store: RunStorage, kind: str, seq: int, args: tuple[Any, ...]) -> tuple[Any, ...]:
    try:
        result: Any = None
        if kind == "wait":
            store.wait()
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
        start_timeout: seconds to wait for the child to build its client.

    Raises:
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
        start_timeout: float = 120.0,
    ) -> None:
        if workers < 1 or max_attempts < 1:
            raise ValueError(
                f"workers and max_attempts must be ≥ 1; received {workers} and {max_attempts}."
            )
        self.local_dir = Path(local_dir)
        self.url = url.rstrip("/")
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
        self._lock = threading.Lock()
        self._seq = 0
        self._dead: str | None = None
        self._closed = False
        ctx = multiprocessing.get_context("spawn")
        self._commands = ctx.Queue()
        self._replies = ctx.Queue()
        settings = dict(
            workers=workers, max_attempts=max_attempts, backoff=backoff, max_backoff=max_backoff
        )
        self._process = ctx.Process(
            target=_serve,
            args=(str(self.local_dir), self.url, options, settings, self._commands, self._replies),
            name="scramjet-upload-process",
            daemon=True,
        )
        self._process.start()
        try:
            self._await_ready(start_timeout)
        except RuntimeError:
            self._stop(timeout=5)
            raise

    @property
    def pid(self) -> int | None:
        """Process id of the upload process."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        """Whether the upload process is running."""
        return self._dead is None and self._process.is_alive()

    def _await_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                status, _, detail, _, _ = self._replies.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._process.is_alive():
                    code = _exit_text(self._process.exitcode)
                    raise RuntimeError(
                        f"the upload process ended while starting ({code})"
                    ) from None
                continue
            if status == "ready":
                return
            raise RuntimeError(f"the upload process could not open {self.url}: {detail}")
        raise RuntimeError(f"the upload process did not start within {timeout:.0f} s")

    # ----------------------------------------------------------------- commands
    def upload(self, rel_path: str | os.PathLike[str]) -> None:
        """Send a relative path to the upload process; returns at once.

        The child coalesces a path queued again before its upload started. After the
        child died, paths are dropped (the final report lists them as not checked).
        """
        if self._closed or self._dead is not None:
            return
        self._commands.put(("upload", Path(rel_path).as_posix()))

    def _request(self, kind: str, *args: Any) -> Any:
        with self._lock:
            if self._dead is not None or self._closed:
                raise _ChildGone
            self._seq += 1
            seq = self._seq
            self._commands.put((kind, seq, *args))
            while True:
                try:
                    reply = self._replies.get(timeout=_POLL_S)
                except queue.Empty:
                    if not self._process.is_alive():
                        self._mark_dead()
                        raise _ChildGone from None
                    continue
                status, got, result, errors, failed = reply
                if got != seq:
                    continue  # an answer to an earlier call that gave up
                self.errors, self.failed_attempts = errors, failed
                if status == "raise":
                    raise RuntimeError(f"the upload process failed in {kind}(): {result}")
                return result

    def _mark_dead(self) -> None:
        self._dead = (
            f"the upload process ended unexpectedly "
            f"({_exit_text(self._process.exitcode)}, pid {self._process.pid})"
        )
        self.errors["(upload process)"] = self._dead
        logger.warning("%s; later uploads are skipped, local files are untouched", self._dead)
        self._commands.cancel_join_thread()  # nobody reads what is still in the pipe

    def wait(self) -> None:
        """Block until every queued upload is done; returns at once if the child died."""
        try:
            self._request("wait")
        except _ChildGone:
            return

    def verify(self, rel: str) -> dict[str, Any]:
        """Check one file on the remote (see :meth:`RunStorage.verify`)."""
        try:
            info: dict[str, Any] = self._request("verify", rel)
            return info
        except _ChildGone:
            return self._unchecked(rel)

    def finish(
        self, *, rounds: int = 3, exclude: Callable[[str], bool] | None = None
    ) -> UploadReport:
        """Wait for uploads, sync what is missing, verify everything (in the child).

        Args:
            rounds: how many sync-and-verify passes before giving up on a file.
            exclude: relative paths for which this returns True are not mirrored; it is
                sent to the child, so it must be picklable (a module-level function).

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
            report: UploadReport = self._request("finish", {"rounds": rounds, "exclude": exclude})
            return report
        except _ChildGone:
            return self._failed_report(exclude)

    def _unchecked(self, rel: str) -> dict[str, Any]:
        local = self.local_dir / rel
        return {
            "size": local.stat().st_size,
            "sha256": file_sha256(local),
            "status": f"not checked: {self._dead or 'upload process closed'}",
        }

    def _failed_report(self, exclude: Callable[[str], bool] | None) -> UploadReport:
        names = []
        for path in sorted(self.local_dir.rglob("*")):
            rel = path.relative_to(self.local_dir).as_posix()
            wanted = path.is_file() and not path.name.startswith(".tmp")
            if wanted and not (exclude and exclude(rel)):
                names.append(rel)
        files = {rel: self._unchecked(rel) for rel in names}
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
        """Let the child finish what is queued, then end it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop(timeout=120)

    def _stop(self, timeout: float) -> None:
        if self._process.is_alive():
            self._commands.put(("close",))
            self._process.join(timeout)
        if self._process.is_alive():
            logger.warning("the upload process did not stop within %.0f s; terminating", timeout)
            self._process.terminate()
            self._process.join(5)
        self._commands.cancel_join_thread()
        self._commands.close()
        self._replies.close()


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
        **kwargs: ``workers``, ``max_attempts``, ``backoff``, ``max_backoff``.

    Returns:
        The engine. When a process was asked for but the options cannot be pickled or
        the child cannot start, a :class:`RunStorage` (after one ``RuntimeWarning``).
    """
    if process is None:
        process = wants_process(url)
    if process:
        try:
            return ProcessRunStorage(local_dir, url, storage_options, **kwargs)
        except (TypeError, RuntimeError, OSError) as exc:
            warnings.warn(
                f"Uploads to {url} run in threads of the training process instead of a "
                f"separate upload process: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
    return RunStorage(local_dir, url, storage_options, **kwargs)


__all__ = ["ProcessRunStorage", "open_storage", "wants_process"]
