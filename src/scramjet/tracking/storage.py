"""Mirroring a run folder to any fsspec URL (``s3://``, ``gs://``, ``file://``, ...).

Uploads run in background threads: :meth:`RunStorage.upload` only puts a path in a
queue and returns, so training never waits on the network. The threads share Python's
GIL with the training loop; :class:`~scramjet.tracking.upload_process.ProcessRunStorage`
runs the same engine in a separate process instead. A failed upload is retried
with exponential backoff; a file queued again while it waits is uploaded once, in its
newest version. :meth:`RunStorage.finish` waits for the queue, uploads every file of the
run folder that the remote lacks or holds in another version, and verifies each remote
file against the local one (size and SHA-256) into a manifest. Local files are only ever
read: a failure is reported in the manifest, never repaired by touching local data.

S3 goes through s3fs/botocore, which read the standard AWS configuration: environment
variables (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ...), the shared
config and credentials files, and instance roles — so S3-compatible stores (MinIO, R2,
Ceph) work by setting ``AWS_ENDPOINT_URL``.

Nothing waits on the network without a bound (see :class:`StorageTimeouts`): every call
to a remote filesystem runs under a deadline (and, for S3, botocore's connect and read
timeouts); :meth:`RunStorage.finish` returns within ``StorageTimeouts.final`` seconds
whatever the endpoint does. Permanent refusals (no such bucket, access denied, invalid
credentials: HTTP 4xx except 408 and 429) are not retried: the first one stops the
uploads and the report's ``error`` says what the remote answered and how to fix it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from scramjet.tracking._interrupts import raise_lost_ctrl_c

T = TypeVar("T")

logger = logging.getLogger(__name__)

_INSTALL_HINTS = {
    "s3": "pip install 'scramjet[s3]'",
    "s3a": "pip install 'scramjet[s3]'",
    "gs": "pip install 'scramjet[gcs]'",
    "gcs": "pip install 'scramjet[gcs]'",
}


@dataclass(frozen=True)
class StorageTimeouts:
    """Bounds on every wait for a remote store, in seconds.

    Attributes:
        connect: S3 (botocore) connect timeout: an endpoint that does not accept the
            connection fails the attempt after this long.
        read: S3 (botocore) read timeout: an endpoint that accepted the connection but
            sends nothing fails the attempt after this long.
        call: deadline of one call to any remote fsspec filesystem (``exists``, ``size``,
            a read of a verification, ...), enforced by running it in a worker thread:
            the backstop for filesystems without timeouts of their own.
        min_rate: an upload of ``n`` bytes may take ``call + n / min_rate`` seconds (bytes
            per second), so a large checkpoint on a slow link is not cut short.
        final: :meth:`RunStorage.finish` returns within this many seconds, whatever the
            endpoint does; what is not verified by then is reported as ``not checked``.
        check: the check of the remote when a run starts (:meth:`RunStorage.check_remote`:
            credentials, bucket, a test write) fails after this many seconds.
    """

    connect: float = 5.0
    read: float = 15.0
    call: float = 20.0
    min_rate: float = float(1 << 20)
    final: float = 30.0
    check: float = 10.0

    def __post_init__(self) -> None:
        names = ("connect", "read", "call", "min_rate", "final", "check")
        values = {k: getattr(self, k) for k in names}
        bad = {k: v for k, v in values.items() if not (isinstance(v, int | float) and v > 0)}
        if bad:
            raise ValueError(f"StorageTimeouts values must be positive numbers; received {bad}.")


_S3_PROTOCOLS = ("s3", "s3a")
_TRANSIENT_STATUS = (408, 429)


def _http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)  # botocore's ClientError
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(status, int):
            return status
    for attr in ("status", "code"):  # aiohttp's ClientResponseError; gcsfs's HttpError
        status = getattr(exc, attr, None)
        if isinstance(status, int) and not isinstance(status, bool) and 100 <= status < 600:
            return status
    return None


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the errors it was raised from or during (each once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def permanent_error(exc: BaseException) -> str | None:
    """What makes ``exc`` permanent (text for the report), or None if a retry may help.

    Permanent: an HTTP 4xx answer other than 408 (timeout) and 429 (slow down), found on
    the exception or its causes (s3fs turns botocore's ``ClientError`` into
    ``FileNotFoundError``/``PermissionError`` and keeps it as the cause); a
    ``PermissionError``; botocore's ``NoCredentialsError`` and ``ParamValidationError``.
    """
    for current in error_chain(exc):
        status = _http_status(current)
        if status is not None:
            if 400 <= status < 500 and status not in _TRANSIENT_STATUS:
                code = _error_code(current)
                return f"HTTP {status}{f' {code}' if code else ''}"
            return None
        if type(current).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
            return "no credentials"
        if type(current).__name__ == "ParamValidationError":  # botocore: an invalid bucket
            return "invalid request (the URL's bucket or key is not a valid name)"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return None


class StorageCheckError(RuntimeError):
    """The remote store cannot be written (no credentials, no such bucket, refused,
    unreachable): found by :meth:`RunStorage.check_remote` before any training."""


def _no_answer(exc: BaseException) -> str:
    """How a failure that is not a refusal reads in an error (the check's)."""
    if isinstance(exc, TimeoutError):
        return "no answer"
    if "connect" in type(exc).__name__.lower() or isinstance(exc, ConnectionError):
        return "no connection"
    return "an error"


def _fix_hint(url: str, what: str) -> str:
    if what in ("no answer", "no connection"):
        return (
            "check that the endpoint is reachable (AWS_ENDPOINT_URL, the network, a proxy) "
            f"and that {url} is the intended store"
        )
    if "404" in what or "NoSuchBucket" in what:
        return f"create the bucket or correct the storage URL ({url})"
    if "no credentials" in what:
        return "set credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE)"
    return (
        "check the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE, storage_options) and that "
        f"they may write to {url}"
    )


def call_with_deadline(fn: Callable[..., T], *args: Any, timeout: float, name: str = "") -> T:
    """``fn(*args)`` in a daemon worker thread; ``TimeoutError`` if it takes longer.

    A call that hangs is abandoned, not interrupted (Python threads cannot be killed): it
    ends with its socket or with the process. The caller is never held past ``timeout``.
    """
    result: list[Any] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn(*args))
        except BaseException as exc:
            error.append(exc)

    raise_lost_ctrl_c()  # the abandoned calls' objects are freed here: finalizers run
    worker = threading.Thread(target=run, name="scramjet-storage-call", daemon=True)
    worker.start()
    worker.join(max(timeout, 0.0))
    raise_lost_ctrl_c()
    if worker.is_alive():
        raise TimeoutError(
            f"{name or getattr(fn, '__name__', 'call')} took more than {timeout:.1f} s"
        )
    if error:
        raise error[0]
    value: T = result[0]
    return value


def with_default_timeouts(
    url: str, storage_options: Mapping[str, Any] | None, timeouts: StorageTimeouts
) -> dict[str, Any]:
    """``storage_options`` with botocore's connect/read timeouts set for ``s3://`` URLs.

    Keys the caller set in ``config_kwargs`` win. botocore's own retries are reduced to
    one retry: this module retries (with backoff, within ``final``) itself.
    """
    options = dict(storage_options or {})
    protocol = url.split("://", 1)[0].lower() if "://" in url else "file"
    if protocol in _S3_PROTOCOLS:
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", timeouts.connect)
        config.setdefault("read_timeout", timeouts.read)
        config.setdefault("retries", {"max_attempts": 2, "mode": "standard"})
        options["config_kwargs"] = config
    return options


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a local file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def open_filesystem(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem and the path inside it for ``url``.

    Raises:
        ImportError: the protocol's fsspec backend is not installed (with the install hint).
    """
    import fsspec

    protocol = url.split("://", 1)[0] if "://" in url else "file"
    options = dict(storage_options or {})
    # A fresh filesystem per run: it reads the environment (AWS_ENDPOINT_URL, profiles)
    # now, and its client is not shared with other threads or runs.
    options.setdefault("skip_instance_cache", True)
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
    except (ImportError, ValueError) as exc:
        hint = _INSTALL_HINTS.get(protocol)
        if hint is None:
            raise
        raise ImportError(f"storage={url!r} needs the {protocol} backend: {hint}") from exc
    return fs, str(path).rstrip("/")


def is_manifest(rel: str) -> bool:
    """``exclude`` for :meth:`RunStorage.finish` that leaves out ``manifest.json`` (written
    from the report afterwards). A module-level function: it can be sent to the upload
    process, which then needs no other module of the package."""
    return rel == "manifest.json"


@dataclass
class UploadReport:
    """What :meth:`RunStorage.finish` found.

    Attributes:
        ok: every local file is on the remote with the same size and hash.
        files: per relative path: ``size``, ``sha256`` and ``status`` (``"verified"``,
            ``"missing"``, ``"size mismatch"``, ``"hash mismatch"`` or an error text).
        failures: relative paths whose status is not ``"verified"``.
        remote: the remote folder.
        failed_attempts: upload tries that failed and were retried during the run.
        error: a failure of the upload machinery itself (e.g. the upload process
            ended), empty when there was none.
    """

    ok: bool
    files: dict[str, dict[str, Any]]
    failures: list[str] = field(default_factory=list)
    remote: str = ""
    failed_attempts: int = 0
    error: str = ""


def check_upload_settings(workers: int, max_attempts: int) -> None:
    """Reject fewer than one upload thread or attempt, saying what was received."""
    if workers < 1 or max_attempts < 1:
        raise ValueError(
            f"workers and max_attempts must be ≥ 1; received {workers} and {max_attempts}."
        )


def list_local_files(local_dir: Path) -> list[str]:
    """Relative paths of every file under ``local_dir`` (temporary files excluded)."""
    out = []
    for path in sorted(local_dir.rglob("*")):
        if path.is_file() and not path.name.startswith(".tmp"):
            out.append(path.relative_to(local_dir).as_posix())
    return out


def unchecked_entry(local: Path, reason: str) -> dict[str, Any]:
    """Manifest entry of a local file whose remote copy could not be checked."""
    return {
        "size": local.stat().st_size,
        "sha256": file_sha256(local),
        "status": f"not checked: {reason}",
    }


class RunStorage:
    """Background mirror of a local folder to a remote folder.

    Args:
        local_dir: the run folder.
        url: remote folder (any fsspec URL).
        storage_options: passed to fsspec (e.g. ``{"anon": False}``, ``client_kwargs``);
            for ``s3://``, ``config_kwargs`` gets the connect/read timeouts of ``timeouts``
            unless it sets them itself.
        workers: upload threads.
        max_attempts: tries per queued upload before it is left to the final sync.
        backoff: first retry delay in seconds; doubled after each failure.
        max_backoff: longest delay between two tries.
        timeouts: bounds on network waits (see :class:`StorageTimeouts`).
        check: run :meth:`check_remote` before starting (raises
            :class:`StorageCheckError` when the remote cannot be written).

    Example:
        >>> import tempfile, pathlib
        >>> src, dst = pathlib.Path(tempfile.mkdtemp()), tempfile.mkdtemp()
        >>> _ = (src / "a.txt").write_text("hello")
        >>> store = RunStorage(src, f"file://{dst}/run")
        >>> store.upload("a.txt")
        >>> store.finish().ok
        True
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
        check: bool = False,
    ) -> None:
        check_upload_settings(workers, max_attempts)
        self.local_dir = Path(local_dir)
        self.url = url.rstrip("/")
        self.timeouts = timeouts or StorageTimeouts()
        options = with_default_timeouts(self.url, storage_options, self.timeouts)
        self.fs, self.remote_root = open_filesystem(self.url, options)
        protocols = (
            self.fs.protocol if isinstance(self.fs.protocol, tuple | list) else (self.fs.protocol,)
        )
        self._local_fs = bool({"file", "local"} & set(protocols))
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.errors: dict[str, str] = {}
        self.failed_attempts = 0
        self.fatal: str | None = None  # set by the first permanent refusal: no more tries
        self._deadline: float | None = None  # set by finish(): no wait goes past it
        self._uploaded: dict[str, tuple[int, int]] = {}  # rel -> (size, mtime_ns) sent
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        # Each queued upload carries the storage, so an idle upload thread holds none: a
        # storage nobody uses any more (a closed checkpoint manager's) is collected, and
        # its threads end with it, once what it queued has been sent.
        self._queue: queue.Queue[tuple[str, RunStorage] | None] = queue.Queue()
        self._closed = False
        self._retry_noted = False  # the first retried failure is reported, the rest counted
        if check:
            self.check_remote()
        else:
            self._warm_up()
        self._threads = [
            threading.Thread(
                target=_upload_worker, args=(self._queue,), name=f"scramjet-upload-{i}", daemon=True
            )
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()
        self._stop_idle = weakref.finalize(self, _stop_workers, self._queue, workers)

    def _warm_up(self) -> None:
        # Creating the S3 client (botocore loads its service models) is a burst of Python
        # work; done here, before training, it does not compete with the loop for the GIL.
        connect = getattr(self.fs, "connect", None)
        if callable(connect):
            try:
                self._call(connect)
            except Exception as exc:  # the uploads will retry and report
                logger.warning("could not prepare the storage client: %s", exc)

    def check_remote(self) -> None:
        """Write and delete a small file in the remote folder, within ``timeouts.check`` s.

        Raises:
            StorageCheckError: what the remote answered (missing credentials, no such
                bucket, access denied, no answer in time) and how to fix it.
        """
        probe = self.remote_path(".scramjet-write-check")

        def write_and_remove() -> None:
            if self._local_fs:
                self.fs.makedirs(self.remote_root, exist_ok=True)
            self.fs.pipe_file(probe, b"ok")
            self.fs.rm_file(probe)

        started = time.monotonic()
        try:
            call_with_deadline(write_and_remove, timeout=self.timeouts.check, name="the check")
        except Exception as exc:
            what = permanent_error(exc) or _no_answer(exc)
            raise StorageCheckError(
                f"storage={self.url!r} cannot be written: a test write answered {what} after "
                f"{time.monotonic() - started:.1f} s ({type(exc).__name__}: {exc}); expected "
                f"a writable folder. Fix: {_fix_hint(self.url, what)}."
            ) from exc

    # ----------------------------------------------------------------- deadlines
    def _remaining(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()

    def _call(self, fn: Callable[..., T], *args: Any, size: int = 0) -> T:
        """One filesystem call; for a remote filesystem, under a deadline: the call
        timeout (plus the transfer time of ``size`` bytes at ``min_rate``), and never past
        the final deadline of :meth:`finish`."""
        if self._local_fs:
            return fn(*args)
        timeout = self.timeouts.call + size / self.timeouts.min_rate
        remaining = self._remaining()
        if remaining is not None:
            timeout = min(timeout, remaining)
            if timeout <= 0:
                raise TimeoutError("the final deadline of the upload has passed")
        name = getattr(fn, "__name__", "").lstrip("_")
        return call_with_deadline(fn, *args, timeout=timeout, name=name)

    def _past_deadline(self) -> bool:
        remaining = self._remaining()
        return remaining is not None and remaining <= 0

    def _refused(self, rel: str, exc: BaseException, what: str) -> None:
        if self.fatal is None:
            self.fatal = (
                f"the remote refused the upload of {rel} to {self.url} with {what} "
                f"({type(exc).__name__}: {exc}); not retried: "
                f"{_fix_hint(self.url, what)}, then resume the run to mirror it"
            )
            logger.error("%s", self.fatal)

    # ----------------------------------------------------------------- queueing
    def upload(self, rel_path: str | os.PathLike[str]) -> None:
        """Queue a file (path relative to the run folder) for upload; returns at once."""
        rel = Path(rel_path).as_posix()
        with self._lock:
            if self._closed or rel in self._pending:
                return  # already queued: the worker reads the newest version
            self._pending.add(rel)
        self._queue.put((rel, self))

    def remote_path(self, rel: str) -> str:
        """Remote path (inside the filesystem) of a relative path."""
        return f"{self.remote_root}/{rel}"

    def _send_queued(self, rel: str) -> None:
        with self._lock:
            self._pending.discard(rel)
        self._put_with_retries(rel)

    def _put_with_retries(self, rel: str, attempts: int | None = None) -> bool:
        local = self.local_dir / rel
        delay = self.backoff
        attempts = attempts or self.max_attempts
        for attempt in range(1, attempts + 1):
            if self.fatal is not None or self._past_deadline():
                return False  # refused for good, or no time left: the report says so
            try:
                stat = local.stat()
            except FileNotFoundError:
                return True  # rotated away (e.g. an old checkpoint): nothing to send
            if self._uploaded.get(rel) == (stat.st_size, stat.st_mtime_ns):
                return True
            try:
                if self._local_fs:  # object stores have no folders (and s3fs would create a bucket)
                    self.fs.makedirs(self.remote_path(rel).rsplit("/", 1)[0], exist_ok=True)
                self._call(self.fs.put_file, str(local), self.remote_path(rel), size=stat.st_size)
            except Exception as exc:  # network errors come in many types
                self.errors[rel] = f"{type(exc).__name__}: {exc}"
                self.failed_attempts += 1
                what = permanent_error(exc)
                if what is not None and not self._local_fs:
                    self._refused(rel, exc, what)
                    return False
                self._note_retry(rel, attempt, attempts, exc)
                if attempt < attempts:
                    remaining = self._remaining()
                    time.sleep(delay if remaining is None else max(0.0, min(delay, remaining)))
                    delay = min(delay * 2, self.max_backoff)
                continue
            self._uploaded[rel] = (stat.st_size, stat.st_mtime_ns)
            self.errors.pop(rel, None)
            return True
        return False

    def _note_retry(self, rel: str, attempt: int, attempts: int, exc: BaseException) -> None:
        """Report the first retried failure of the run; later ones only at debug level
        (they are counted in ``failed_attempts`` and the manifest)."""
        if self._retry_noted:
            logger.debug("upload of %s failed (attempt %d): %s", rel, attempt, exc)
            return
        self._retry_noted = True
        logger.warning(
            "upload of %s to %s failed (%s); retrying with backoff, up to %d attempts per "
            "file; further failures are counted in manifest.json",
            rel,
            self.url,
            exc,
            attempts,
        )

    # ----------------------------------------------------------------- finishing
    def wait(self, timeout: float | None = None) -> bool:
        """Block until every queued upload is done (succeeded or out of attempts).

        Args:
            timeout: the longest wait in seconds; None: unbounded before :meth:`finish`,
                and at most ``timeouts.call`` past its final deadline after it.

        Returns:
            False if uploads were still running when the wait ended.
        """
        if timeout is None and self._deadline is not None:
            timeout = max(0.0, self._remaining() or 0.0) + self.timeouts.call
        done = self._queue.all_tasks_done
        with done:
            return done.wait_for(lambda: self._queue.unfinished_tasks == 0, timeout)

    def local_files(self) -> list[str]:
        """Relative paths of every file in the run folder (temporary files excluded)."""
        return list_local_files(self.local_dir)

    def finish(
        self,
        *,
        rounds: int = 3,
        exclude: Callable[[str], bool] | None = None,
        timeout: float | None = None,
    ) -> UploadReport:
        """Wait for uploads, sync what is missing, verify everything, remove stale remotes.

        Args:
            rounds: how many sync-and-verify passes before giving up on a file.
            exclude: relative paths for which this returns True are not mirrored.
            timeout: return within this many seconds (default ``timeouts.final``); files
                not verified by then are reported as ``not checked``.

        Returns:
            An :class:`UploadReport`; local files are never modified.
        """
        budget = self.timeouts.final if timeout is None else timeout
        self._deadline = time.monotonic() + budget
        self.wait(timeout=budget)
        files: dict[str, dict[str, Any]] = {}
        for round_ in range(rounds):
            names = [r for r in self.local_files() if not (exclude and exclude(r))]
            files = self._verify_all(names)
            bad = [rel for rel, info in files.items() if info["status"] != "verified"]
            if not bad or round_ == rounds - 1 or self.fatal or self._past_deadline():
                break
            time.sleep(max(0.0, min(self.backoff * 2**round_, self.max_backoff, *self._left())))
            for rel in bad:
                self._uploaded.pop(rel, None)
                if not self._put_with_retries(rel, attempts=1):
                    break  # the remote is failing: wait for the next round
        if self.fatal is None and not self._past_deadline():
            self._remove_stale(set(files))
        failures = sorted(rel for rel, info in files.items() if info["status"] != "verified")
        return UploadReport(
            ok=not failures,
            files=files,
            failures=failures,
            remote=self.url,
            failed_attempts=self.failed_attempts,
            error=self.fatal or "",
        )

    def _left(self) -> list[float]:
        remaining = self._remaining()
        return [] if remaining is None else [remaining]

    def _verify_all(self, names: list[str]) -> dict[str, dict[str, Any]]:
        files: dict[str, dict[str, Any]] = {}
        reason = ""
        for rel in names:
            if not reason and self.fatal is not None:
                reason = "the remote refused the upload (see error)"
            elif not reason and self._past_deadline():
                reason = f"no time left (final deadline {self.timeouts.final:g} s)"
            if reason:  # do not pay one network timeout per file
                files[rel] = unchecked_entry(self.local_dir / rel, reason)
                continue
            files[rel] = self._verify(rel)
            if files[rel]["status"].startswith("error"):
                reason = "remote unreachable"
        return files

    def verify(self, rel: str) -> dict[str, Any]:
        """Check one file on the remote: ``size``, ``sha256`` and ``status`` (see
        :class:`UploadReport`)."""
        return self._verify(rel)

    def _remote_sha256(self, remote: str) -> str:
        digest = hashlib.sha256()
        with self.fs.open(remote, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    def _verify(self, rel: str) -> dict[str, Any]:
        local = self.local_dir / rel
        size, digest = local.stat().st_size, file_sha256(local)
        info: dict[str, Any] = {"size": size, "sha256": digest}
        try:
            remote = self.remote_path(rel)
            if not self._call(self.fs.exists, remote):
                info["status"] = "missing"
            elif int(self._call(self.fs.size, remote)) != size:
                info["status"] = "size mismatch"
            else:
                ok = self._call(self._remote_sha256, remote, size=size) == digest
                info["status"] = "verified" if ok else "hash mismatch"
        except Exception as exc:
            info["status"] = f"error: {type(exc).__name__}: {exc}"
        return info

    def _remove_stale(self, keep: set[str]) -> None:
        # Rotated checkpoints were deleted locally; delete their remote copies too.
        try:
            found = self._call(self.fs.find, self.remote_root)
        except Exception:
            return
        prefix = self.remote_root.rstrip("/") + "/"
        for path in found:
            rel = str(path)[len(prefix) :] if str(path).startswith(prefix) else None
            if rel and rel.startswith("checkpoints/") and rel not in keep:
                try:
                    self._call(self.fs.rm_file, path)
                except Exception as exc:
                    logger.warning("could not remove stale remote file %s: %s", path, exc)

    def close(self, timeout: float = 60.0) -> None:
        """Stop the upload threads (after what is queued, for at most ``timeout`` seconds;
        after :meth:`finish`, at most ``timeouts.call`` past its deadline)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop_idle()  # one stop per thread, queued after the uploads
        if self._deadline is not None:
            timeout = min(timeout, max(0.0, self._remaining() or 0.0) + self.timeouts.call)
        end = time.monotonic() + timeout
        for thread in self._threads:  # a thread stuck in a call is abandoned (daemon)
            thread.join(max(0.0, end - time.monotonic()))


def _upload_worker(jobs: queue.Queue[tuple[str, RunStorage] | None]) -> None:
    """An upload thread: sends what its storage queued, until told to stop (``None``)."""
    while True:
        job = jobs.get()
        if job is None:
            jobs.task_done()
            return
        try:
            job[1]._send_queued(job[0])
        finally:
            del job  # idle, the thread keeps no storage alive
            jobs.task_done()


def _stop_workers(jobs: queue.Queue[tuple[str, RunStorage] | None], workers: int) -> None:
    for _ in range(workers):
        jobs.put(None)


__all__ = [
    "RunStorage",
    "StorageCheckError",
    "StorageTimeouts",
    "UploadReport",
    "file_sha256",
    "is_manifest",
    "open_filesystem",
    "permanent_error",
]
