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
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_INSTALL_HINTS = {
    "s3": "pip install 'scramjet[s3]'",
    "s3a": "pip install 'scramjet[s3]'",
    "gs": "pip install 'scramjet[gcs]'",
    "gcs": "pip install 'scramjet[gcs]'",
}


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
        storage_options: passed to fsspec (e.g. ``{"anon": False}``, ``client_kwargs``).
        workers: upload threads.
        max_attempts: tries per queued upload before it is left to the final sync.
        backoff: first retry delay in seconds; doubled after each failure.
        max_backoff: longest delay between two tries.

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
    ) -> None:
        check_upload_settings(workers, max_attempts)
        self.local_dir = Path(local_dir)
        self.url = url.rstrip("/")
        self.fs, self.remote_root = open_filesystem(self.url, storage_options)
        protocols = (
            self.fs.protocol if isinstance(self.fs.protocol, tuple | list) else (self.fs.protocol,)
        )
        self._local_fs = bool({"file", "local"} & set(protocols))
        self._warm_up()
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.errors: dict[str, str] = {}
        self.failed_attempts = 0
        self._uploaded: dict[str, tuple[int, int]] = {}  # rel -> (size, mtime_ns) sent
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"scramjet-upload-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def _warm_up(self) -> None:
        # Creating the S3 client (botocore loads its service models) is a burst of Python
        # work; done here, before training, it does not compete with the loop for the GIL.
        connect = getattr(self.fs, "connect", None)
        if callable(connect):
            try:
                connect()
            except Exception as exc:  # the uploads will retry and report
                logger.warning("could not prepare the storage client: %s", exc)

    # ----------------------------------------------------------------- queueing
    def upload(self, rel_path: str | os.PathLike[str]) -> None:
        """Queue a file (path relative to the run folder) for upload; returns at once."""
        rel = Path(rel_path).as_posix()
        with self._lock:
            if self._closed or rel in self._pending:
                return  # already queued: the worker reads the newest version
            self._pending.add(rel)
        self._queue.put(rel)

    def remote_path(self, rel: str) -> str:
        """Remote path (inside the filesystem) of a relative path."""
        return f"{self.remote_root}/{rel}"

    def _work(self) -> None:
        while True:
            rel = self._queue.get()
            if rel is None:
                self._queue.task_done()
                return
            with self._lock:
                self._pending.discard(rel)
            try:
                self._put_with_retries(rel)
            finally:
                self._queue.task_done()

    def _put_with_retries(self, rel: str, attempts: int | None = None) -> bool:
        local = self.local_dir / rel
        delay = self.backoff
        attempts = attempts or self.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                stat = local.stat()
            except FileNotFoundError:
                return True  # rotated away (e.g. an old checkpoint): nothing to send
            if self._uploaded.get(rel) == (stat.st_size, stat.st_mtime_ns):
                return True
            try:
                if self._local_fs:  # object stores have no folders (and s3fs would create a bucket)
                    self.fs.makedirs(self.remote_path(rel).rsplit("/", 1)[0], exist_ok=True)
                self.fs.put_file(str(local), self.remote_path(rel))
            except Exception as exc:  # network errors come in many types
                self.errors[rel] = f"{type(exc).__name__}: {exc}"
                self.failed_attempts += 1
                logger.warning("upload of %s failed (attempt %d): %s", rel, attempt, exc)
                if attempt < attempts:
                    time.sleep(delay)
                    delay = min(delay * 2, self.max_backoff)
                continue
            self._uploaded[rel] = (stat.st_size, stat.st_mtime_ns)
            self.errors.pop(rel, None)
            return True
        return False

    # ----------------------------------------------------------------- finishing
    def wait(self) -> None:
        """Block until every queued upload is done (succeeded or out of attempts)."""
        self._queue.join()

    def local_files(self) -> list[str]:
        """Relative paths of every file in the run folder (temporary files excluded)."""
        return list_local_files(self.local_dir)

    def finish(
        self, *, rounds: int = 3, exclude: Callable[[str], bool] | None = None
    ) -> UploadReport:
        """Wait for uploads, sync what is missing, verify everything, remove stale remotes.

        Args:
            rounds: how many sync-and-verify passes before giving up on a file.
            exclude: relative paths for which this returns True are not mirrored.

        Returns:
            An :class:`UploadReport`; local files are never modified.
        """
        self.wait()
        files: dict[str, dict[str, Any]] = {}
        for round_ in range(rounds):
            names = [r for r in self.local_files() if not (exclude and exclude(r))]
            files = self._verify_all(names)
            bad = [rel for rel, info in files.items() if info["status"] != "verified"]
            if not bad or round_ == rounds - 1:
                break
            time.sleep(min(self.backoff * 2**round_, self.max_backoff))
            for rel in bad:
                self._uploaded.pop(rel, None)
                if not self._put_with_retries(rel, attempts=1):
                    break  # the remote is failing: wait for the next round
        self._remove_stale(set(files))
        failures = sorted(rel for rel, info in files.items() if info["status"] != "verified")
        return UploadReport(
            ok=not failures,
            files=files,
            failures=failures,
            remote=self.url,
            failed_attempts=self.failed_attempts,
        )

    def _verify_all(self, names: list[str]) -> dict[str, dict[str, Any]]:
        files: dict[str, dict[str, Any]] = {}
        unreachable = False
        for rel in names:
            if unreachable:  # do not pay one network timeout per file
                files[rel] = unchecked_entry(self.local_dir / rel, "remote unreachable")
                continue
            files[rel] = self._verify(rel)
            unreachable = files[rel]["status"].startswith("error")
        return files

    def verify(self, rel: str) -> dict[str, Any]:
        """Check one file on the remote: ``size``, ``sha256`` and ``status`` (see
        :class:`UploadReport`)."""
        return self._verify(rel)

    def _verify(self, rel: str) -> dict[str, Any]:
        local = self.local_dir / rel
        size, digest = local.stat().st_size, file_sha256(local)
        info: dict[str, Any] = {"size": size, "sha256": digest}
        try:
            remote = self.remote_path(rel)
            if not self.fs.exists(remote):
                info["status"] = "missing"
            elif int(self.fs.size(remote)) != size:
                info["status"] = "size mismatch"
            else:
                remote_digest = hashlib.sha256()
                with self.fs.open(remote, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        remote_digest.update(block)
                ok = remote_digest.hexdigest() == digest
                info["status"] = "verified" if ok else "hash mismatch"
        except Exception as exc:
            info["status"] = f"error: {type(exc).__name__}: {exc}"
        return info

    def _remove_stale(self, keep: set[str]) -> None:
        # Rotated checkpoints were deleted locally; delete their remote copies too.
        try:
            found = self.fs.find(self.remote_root)
        except Exception:
            return
        prefix = self.remote_root.rstrip("/") + "/"
        for path in found:
            rel = str(path)[len(prefix) :] if str(path).startswith(prefix) else None
            if rel and rel.startswith("checkpoints/") and rel not in keep:
                try:
                    self.fs.rm_file(path)
                except Exception as exc:
                    logger.warning("could not remove stale remote file %s: %s", path, exc)

    def close(self) -> None:
        """Stop the upload threads (after what is queued)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=60)


__all__ = ["RunStorage", "UploadReport", "file_sha256", "is_manifest", "open_filesystem"]
