"""Packs on object storage: upload, and a bounded local shard cache shared by processes.

A pack at an fsspec URL (``s3://``, ``gs://``, ``file://``, ...) is read through a cache
directory on local disk. Every process of a node (ranks and DataLoader workers) uses the
same directory, coordinated by ``flock`` locks held on files inside it:

- ``.locks/<sha256>.lock``: held exclusively while one process downloads that shard; the
  others wait on it, then find the finished file. One download per shard per node.
- ``<sha256>.h5``: a finished, verified shard, named after its SHA-256 (so two packs
  holding the same shard share it, and a pack rewritten at the same URL never reuses a
  stale file). A process reading it holds a shared lock on it; eviction takes the
  exclusive lock without waiting, so a shard in use is never evicted.
- ``<sha256>.part``: a download in progress, allocated at its full size before the first
  byte arrives, so the bytes on disk never exceed what was reserved. One whose download
  lock nobody holds was left by a killed reader: removed when a cache opens, and when
  room is made under ``cache_limit``.
- ``.lock``: held while a process reserves room (evicting least-recently-used shards).
- ``downloads.log``: one line per finished download (digest, bytes), for accounting.

Each download streams into its ``.part`` file while hashing, is compared with the
manifest's SHA-256 and size, and only then renamed into place. Failed attempts are
retried with exponential backoff; the last failure raises naming the shard and the URL.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

# Store access lives in _remote_fs; the names the writer, the package and older callers
# import from here are re-exported (``X as X``).
from scramjet.data._remote_fs import _FILESYSTEMS as _FILESYSTEMS
from scramjet.data._remote_fs import Retry as Retry
from scramjet.data._remote_fs import ShardDownloadError as ShardDownloadError
from scramjet.data._remote_fs import _filesystem, _refused, _retried, _transient, check_cache_wait
from scramjet.data._remote_fs import is_url as is_url
from scramjet.data._remote_fs import parse_size as parse_size
from scramjet.data.format import MANIFEST_NAME, Manifest, PackFormatError, ShardInfo

logger = logging.getLogger(__name__)

CHUNK = 64 << 20  # bytes per read of a download: shards below this are fetched in one GET
LOG_NAME = "downloads.log"


def remote_file(url: str, file: str) -> str:
    """The URL of a manifest's shard ``file``, which must stay inside the pack.

    Raises:
        PackFormatError: the name is absolute or contains ``..``.
    """
    parts = file.replace("\\", "/").split("/")
    if file.startswith(("/", "\\")) or "://" in file or ".." in parts:
        raise PackFormatError(
            f"shard file {file!r} in pack {url!r} leads outside the pack; a manifest may "
            "only name files inside its pack, re-create the pack"
        )
    return f"{url.rstrip('/')}/{file}"


def pack_url(url: str) -> str:
    """The URL of a pack's folder, given that or its manifest's URL (as a local pack's
    ``manifest.json`` path is accepted), without a trailing slash."""
    url = url.rstrip("/")
    if url.endswith(f"/{MANIFEST_NAME}"):
        url = url[: -len(MANIFEST_NAME) - 1].rstrip("/")
    return url


def _no_bucket(exc: BaseException) -> bool:
    """Whether a ``FileNotFoundError`` is the store's "no such bucket" (S3's NoSuchBucket,
    GCS's 404 for the bucket), not a missing object: said by it or its causes."""
    from scramjet.tracking.storage import error_chain

    texts = (f"{type(e).__name__} {e}".lower() for e in error_chain(exc))
    return any("nosuchbucket" in t or "bucket does not exist" in t for t in texts)


def read_manifest(url: str, options: Mapping[str, Any] | None, retry: Retry) -> Manifest:
    """The manifest of the pack at ``url`` (the pack's folder or its manifest), read with
    retries.

    Raises:
        PackFormatError: no manifest there (the pack is incomplete or the URL is wrong).
        ShardDownloadError: the store kept failing.
    """
    url = pack_url(url)
    where = f"{url}/{MANIFEST_NAME}"
    last: BaseException | None = None
    for delay in retry.delays():
        time.sleep(delay)
        try:
            fs, path = _filesystem(where, options)
            text = fs.cat_file(path).decode("utf-8")
            return Manifest.from_json(text, where=where)
        except FileNotFoundError as exc:
            if _no_bucket(exc):  # s3fs says FileNotFoundError for a missing bucket too
                raise _refused(f"read {where}", exc) from exc
            raise PackFormatError(
                f"no pack at {url!r}: {MANIFEST_NAME} is missing. A pack is complete only "
                "once its manifest exists; pass the URL given to scramjet.data.pack"
            ) from None
        except (PackFormatError, ImportError):
            raise
        except Exception as exc:
            if not _transient(exc):
                raise _refused(f"read {where}", exc) from exc
            last = exc
    raise ShardDownloadError(
        f"cannot read {where} after {retry.attempts} attempts ({type(last).__name__}: {last});"
        " check that the store is reachable"
    )


def upload_pack(local: Path, url: str, options: Mapping[str, Any] | None, retry: Retry) -> None:
    """Copy a finished local pack to ``url``: every shard first, the manifest last.

    A manifest already at ``url`` (a pack being replaced, which :func:`prepare_remote_dst`
    allowed) is deleted before the first shard is uploaded: from then on readers refuse
    the URL until the new manifest arrives, rather than read new shards under the old
    manifest. Each file is uploaded whole (``put_file``), retried with backoff. Readers
    accept a pack only once its manifest exists, so they never see a partial upload.
    """
    manifest = Manifest.load(local)
    files = [info.file for info in manifest.shards] + [MANIFEST_NAME]
    where = f"{url.rstrip('/')}/{MANIFEST_NAME}"
    fs, old = _filesystem(where, options)
    stale: list[str] = []
    if _retried(f"look for an existing pack at {where}", retry, lambda: fs.exists(old)):
        with contextlib.suppress(Exception):  # an unreadable old manifest: nothing to tidy
            stale = [info.file for info in read_manifest(url, options, retry).shards]
        with contextlib.suppress(FileNotFoundError):
            _retried(f"delete the replaced manifest {where}", retry, lambda: fs.rm_file(old))
    for name in files:
        target = remote_file(url, name)
        _, path = _filesystem(target, options)
        if url.lower().startswith("file://"):  # object stores have no folders to make
            fs.makedirs(fs._parent(path), exist_ok=True)
        last: BaseException | None = None
        for delay in retry.delays():
            time.sleep(delay)
            try:
                fs.put_file(str(local / name), path)
                break
            except Exception as exc:
                if not _transient(exc):
                    raise _refused(f"upload {name} to {target}", exc) from exc
                last = exc
        else:
            raise ShardDownloadError(
                f"cannot upload {name} to {target} after {retry.attempts} attempts "
                f"({type(last).__name__}: {last}); the pack at {url!r} is incomplete "
                "(no manifest) until pack() is run again"
            )
    stale += _unnamed_shards(url, options)
    _remove_stale_shards(url, options, set(stale) - set(files))


def _unnamed_shards(url: str, options: Mapping[str, Any] | None) -> list[str]:
    """The shard files (``shard-NNNNN.h5``) in the pack's folder: those no manifest names
    were left by an upload that was interrupted after its old manifest was deleted."""
    fs, path = _filesystem(url, options)
    try:
        found = fs.ls(path, detail=False)
    except Exception:  # nothing listed: nothing to tidy (the pack itself is whole)
        return []
    finally:  # a kept listing would answer later exists() calls of this process, stale
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)
    names = [str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in found]
    return [name for name in names if re.fullmatch(r"shard-\d{5,}\.h5", name)]


def _remove_stale_shards(url: str, options: Mapping[str, Any] | None, names: set[str]) -> None:
    """After a re-pack into fewer shards, or one that follows an interrupted upload: delete
    the shards in the pack's folder that its manifest does not name. A failure leaves
    them, with a warning: the pack is whole."""
    for name in sorted(names):
        fs, path = _filesystem(remote_file(url, name), options)
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            continue
        except Exception as exc:
            warnings.warn(
                f"the new pack at {url!r} is complete, but the replaced pack's shard {name} "
                f"could not be deleted ({type(exc).__name__}: {exc}); delete it by hand",
                RuntimeWarning,
                stacklevel=3,
            )


def prepare_remote_dst(
    url: str, options: Mapping[str, Any] | None, overwrite: bool, retry: Retry | None = None
) -> None:
    """Refuse an existing pack at ``url`` unless ``overwrite``, before anything is packed.

    The existing pack is left whole here: it is replaced only by :func:`upload_pack`, once
    the new pack has been written locally, so a re-pack that fails or is interrupted
    while packing (a bad row, Ctrl-C) leaves the old pack readable. A store that does not
    answer is retried with backoff, then named in a :class:`ShardDownloadError`.
    """
    where = f"{url.rstrip('/')}/{MANIFEST_NAME}"
    fs, path = _filesystem(where, options)
    exists = _retried(
        f"look for an existing pack at {where}", retry or Retry(), lambda: fs.exists(path)
    )
    if exists and not overwrite:
        raise FileExistsError(
            f"a pack already exists at {url!r}; pass overwrite=True or choose another dst"
        )


class _Locked:
    """An open file with an ``flock`` held; :meth:`close` releases the lock.

    A forked process (a DataLoader worker started while another thread holds a lock)
    gets a copy of the descriptor, and an ``flock`` lives until the last copy is closed:
    closing ours alone would leave the lock held by the child, which then waits forever
    on that very lock. So the process that took the lock unlocks it before closing; a
    child closing its inherited copy only closes it, leaving the parent's lock alone.
    """

    def __init__(
        self, path: Path, exclusive: bool, wait: bool = True, create: bool = False
    ) -> None:
        self.pid = os.getpid()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT if create else os.O_RDONLY, 0o644)
        flags = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(self.fd, flags | (0 if wait else fcntl.LOCK_NB))
        except BaseException:
            # __del__ still runs on an object whose __init__ raised: mark the descriptor
            # closed, or it would close whatever file reuses the number by then.
            os.close(self.fd)
            self.fd = -1
            raise

    def close(self) -> None:
        if getattr(self, "fd", -1) >= 0:
            try:
                if self.pid == os.getpid():
                    fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = -1

    def __del__(self) -> None:  # a dropped hold (a cancelled prefetch) releases its lock
        self.close()

    def __enter__(self) -> _Locked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_owners: dict[tuple[int, str], _Locked] = {}  # (pid, cache folder): its owner file


def _hold_owner(root: Path) -> None:
    """Lock ``<root>/.readers/<pid>.owner`` for as long as this process lives: the readers
    of the caches it made (its DataLoader workers, one generation per epoch) keep their
    place in the cache while it lives (``_cache_readers``)."""
    key = (os.getpid(), str(root))
    if key in _owners:
        return
    (root / ".readers").mkdir(exist_ok=True)
    with _Locked(root / ".lock", exclusive=True, create=True):  # not seen half-made
        # Asked again under the cache's lock, which threads of one process take in turn
        # too: a thread that found no owner above while another made it would otherwise
        # wait forever on the owner file that other thread holds for this process.
        if key not in _owners:
            owner = root / ".readers" / f"{key[0]}.owner"
            _owners[key] = _Locked(owner, exclusive=True, create=True)


class ShardCache:
    """Local cache of one remote pack's shards, shared by every process of a node.

    Args:
        url: the pack's URL.
        manifest: its manifest.
        cache_dir: the cache directory (shared by all processes of the node).
        cache_limit: bytes the cache directory may hold (None: no limit).
        storage_options: passed to fsspec (``anon``, ``key``, ``endpoint_url``...).
        retry: how failed downloads are retried.
        wait_for_room: seconds a download waits for room in a full cache before it fails
            (None: 120 s).
    """

    def __init__(
        self,
        url: str,
        manifest: Manifest,
        cache_dir: Path,
        cache_limit: int | None,
        storage_options: Mapping[str, Any] | None = None,
        retry: Retry | None = None,
        wait_for_room: float | None = None,
    ) -> None:
        self.url = pack_url(url)
        self.manifest = manifest
        self.root = Path(cache_dir).expanduser()  # "~/cache", as a shell would read it
        self.limit = cache_limit
        self.options = dict(storage_options or {})
        self.retry = retry or Retry()
        self.wait_for_room = check_cache_wait(wait_for_room)
        self._failures: dict[int, tuple[float, Exception]] = {}  # shard: (when, error)
        self.owner = os.getpid()  # the process that made it; its loader's workers read for it
        (self.root / ".locks").mkdir(parents=True, exist_ok=True)
        # Downloads of readers killed mid-way (OOM, SIGKILL) would stay forever without a
        # limit to evict for, or for a shard never read again: removed as the cache opens.
        self._drop_abandoned(keep=None)
        if cache_limit is not None:
            biggest = max((s.bytes for s in manifest.shards), default=0)
            if biggest > cache_limit:
                raise ValueError(
                    f"cache_limit={cache_limit} bytes is smaller than the largest shard of "
                    f"{url!r} ({biggest} bytes); raise it to at least a few shards "
                    f"(the shuffle window plus the shards read ahead)"
                )
            _hold_owner(self.root)

    def room(self, shards: int) -> tuple[bool, int]:
        """Whether the limit holds ``shards`` of the pack's largest shards at once, and
        the bytes they take."""
        sizes = sorted((s.bytes for s in self.manifest.shards), reverse=True)
        need = sum(sizes[:shards])
        return self.limit is None or need <= self.limit, need

    def local_path(self, k: int) -> Path:
        """Where shard ``k`` lives once downloaded."""
        return self.root / f"{self.manifest.shards[k].sha256}.h5"

    def open(self, k: int, claimed: _Locked | None = None) -> tuple[Path, _Locked]:
        """Shard ``k`` on local disk, downloaded if needed, held in use until closed."""
        path = self.local_path(k)
        while True:
            self.ensure(k, claimed)
            claimed = None
            try:
                held = _Locked(path, exclusive=False)
            except FileNotFoundError:
                continue  # evicted between the download and the lock: fetch it again
            stat = os.fstat(held.fd)
            # Still the file in the cache (not evicted), and whole (not cut short by a
            # crash or a full disk); else ensure() fetches it again.
            if stat.st_nlink > 0 and stat.st_size == self.manifest.shards[k].bytes:
                with contextlib.suppress(OSError):  # most recently used: its access time
                    # (the modification time stays: an open shard checks it for rewrites)
                    os.utime(path, ns=(time.time_ns(), stat.st_mtime_ns))
                return path, held
            held.close()

    def cached(self, k: int, warn: bool = False) -> bool:
        """Whether shard ``k`` is in the cache at the size the manifest records. A file of
        another size (cut short by a crash during a copy or a full disk) is not: the next
        download replaces it (``warn``: say so in the log)."""
        path, info = self.local_path(k), self.manifest.shards[k]
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return False
        if size != info.bytes and warn:
            logger.warning(
                "cached shard %s of %s (%s) holds %d bytes, the manifest says %d: "
                "downloading it again",
                *(info.file, self.url, path, size, info.bytes),
            )
        return size == info.bytes

    def claim(self, k: int) -> _Locked | None:
        """The download lock of shard ``k`` if it is missing and nobody downloads it now.

        A prefetcher claims the shards it will download before the reader is handed the
        indices that need them, so DataLoader workers wait for those downloads instead
        of starting their own (with a client of their own to set up)."""
        if self.cached(k):
            return None
        try:
            lock = _Locked(self._lock_path(k), exclusive=True, wait=False, create=True)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            return None
        if self.cached(k):
            lock.close()
            return None
        return lock

    def _lock_path(self, k: int) -> Path:
        return self.root / ".locks" / f"{self.manifest.shards[k].sha256}.lock"

    def ensure(self, k: int, claimed: _Locked | None = None) -> Path:
        """Download shard ``k`` unless a process of this node already has (or is).

        ``claimed``: its download lock, already taken by :meth:`claim` (released here).
        """
        path = self.local_path(k)
        if claimed is None and self.cached(k):
            return path
        asked = time.monotonic()
        lock = claimed or _Locked(self._lock_path(k), exclusive=True, create=True)
        with lock:
            if self.cached(k, warn=True):  # another process finished it while we waited
                return path
            failed = self._failures.get(k)
            if failed is not None and failed[0] >= asked:
                # A thread of this process (a read-ahead) made every attempt while we
                # waited for it: report its failure instead of making as many again.
                raise type(failed[1])(str(failed[1]))
            part = path.with_suffix(".part")
            self._reserve(k, part)
            try:
                self._download(k, part)
                # Under the cache's lock: a directory listed while an entry is renamed
                # may show it under neither name, and the room counted would be short.
                with _Locked(self.root / ".lock", exclusive=True, create=True):
                    os.replace(part, path)
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    part.unlink()
                if isinstance(exc, (ShardDownloadError, PackFormatError)):
                    self._failures[k] = (time.monotonic(), exc)
                raise
            info = self.manifest.shards[k]
            with open(self.root / LOG_NAME, "a", encoding="utf-8") as log:
                log.write(f"{info.sha256} {info.bytes} {info.file}\n")
        return path

    # -- room in the cache -------------------------------------------------------------
    def usage(self) -> int:
        """Bytes held by finished shards and reserved downloads."""
        total = 0
        for entry in os.scandir(self.root):
            if entry.name.endswith((".h5", ".part")):
                with contextlib.suppress(FileNotFoundError):
                    total += entry.stat().st_size
        return total

    def _drop_abandoned(self, keep: Path | None) -> None:
        """Delete ``.part`` files no process is downloading into: left by a reader killed
        in the middle of a download (OOM, SIGKILL), they would take room forever. A live
        download holds its shard's lock, so its file is kept (as is ``keep``)."""
        for entry in os.scandir(self.root):
            if not entry.name.endswith(".part") or entry.path == str(keep):
                continue
            lock = self.root / ".locks" / f"{entry.name[: -len('.part')]}.lock"
            try:  # a download in progress holds this lock until its file is renamed
                with _Locked(lock, exclusive=True, wait=False, create=True):
                    Path(entry.path).unlink(missing_ok=True)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise

    def _evict(self, need: int, keep: Path) -> int:
        """Delete abandoned downloads, then least-recently-used shards not in use, until
        ``need`` bytes fit."""
        assert self.limit is not None
        used = self.usage()
        if used + need > self.limit:
            self._drop_abandoned(keep)
            used = self.usage()
        shards = []
        for entry in os.scandir(self.root):
            if entry.name.endswith(".h5") and entry.path != str(keep):
                with contextlib.suppress(FileNotFoundError):
                    stat = entry.stat()
                    shards.append((stat.st_atime, stat.st_size, Path(entry.path)))
        for _, size, path in sorted(shards):
            if used + need <= self.limit:
                break
            try:
                with _Locked(path, exclusive=True, wait=False):
                    path.unlink()
                used -= size
            except FileNotFoundError:
                continue
            except OSError as exc:  # EWOULDBLOCK: a process reads it
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
        return used

    def _reserve(self, k: int, part: Path) -> None:
        """Make room for shard ``k`` and allocate its ``.part`` file at full size."""
        size = self.manifest.shards[k].bytes
        deadline = time.monotonic() + self.wait_for_room
        while True:
            with _Locked(self.root / ".lock", exclusive=True, create=True):
                used = self._evict(size, part) if self.limit is not None else 0
                if self.limit is None or used + size <= self.limit:
                    fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                    try:
                        if size and hasattr(os, "posix_fallocate"):
                            os.posix_fallocate(fd, 0, size)
                        else:
                            os.truncate(fd, size)
                    finally:
                        os.close(fd)
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"cache_limit={self.limit} bytes: no room for shard "
                    f"{self.manifest.shards[k].file} ({size} bytes) of {self.url!r} in "
                    f"{str(self.root)!r}: {used} bytes are held by shards in use after "
                    f"waiting cache_wait={self.wait_for_room:g} s for readers to move on. "
                    "Raise cache_limit (to at least (shuffle_window + prefetch + 2) shards, "
                    "for every pack read at once), lower prefetch, or raise cache_wait"
                )
            time.sleep(0.2)  # shards in use are released as readers move on

    # -- downloads -----------------------------------------------------------------------
    def _fetch(self, remote: str, part: Path, expected: int) -> tuple[str, int]:
        """Stream ``remote`` into ``part``: its SHA-256 and size, or size -1 when the
        object holds more than the ``expected`` bytes reserved for it (reading stops
        there, so a wrong object in the store never fills the disk past the limit)."""
        fs, path = _filesystem(remote, self.options)
        digest, size = hashlib.sha256(), 0
        with (
            fs.open(path, "rb", block_size=CHUNK, cache_type="none") as src,
            open(part, "r+b") as dst,
        ):
            while chunk := src.read(min(CHUNK, expected + 1 - size)):
                if size + len(chunk) > expected:
                    return digest.hexdigest(), -1
                digest.update(chunk)
                dst.write(chunk)
                size += len(chunk)
        return digest.hexdigest(), size

    def _download(self, k: int, part: Path) -> None:
        info: ShardInfo = self.manifest.shards[k]
        remote = remote_file(self.url, info.file)
        last: BaseException | None = None
        bad_digests = 0
        for delay in self.retry.delays():
            time.sleep(delay)
            try:
                digest, size = self._fetch(remote, part, info.bytes)
            except Exception as exc:
                replaced = self._replaced(info) if isinstance(exc, FileNotFoundError) else ""
                if replaced:  # removed by a re-pack into fewer shards, or being re-uploaded
                    raise self._replaced_error(info, replaced) from exc
                if not _transient(exc):
                    raise ShardDownloadError(
                        f"cannot download shard {info.file} of pack {self.url!r} "
                        f"({type(exc).__name__}: {exc}); check the URL and credentials"
                    ) from exc
                logger.info("download of %s failed (%r); retrying", remote, exc)
                last = exc
                continue
            if digest == info.sha256 and size == info.bytes:
                return
            bad_digests += 1
            if bad_digests >= 2:  # the same wrong bytes twice: the stored file is damaged
                replaced = self._replaced(info)
                if replaced:
                    raise self._replaced_error(info, replaced)
                got = (
                    f"{size} bytes, the manifest says {info.bytes}"
                    if size >= 0
                    else f"longer than the manifest's {info.bytes} bytes"
                )
                raise PackFormatError(
                    f"shard {info.file} of pack {self.url!r} fails its SHA-256 check "
                    f"({got}): the stored file is "
                    "corrupted or was replaced; re-create or re-upload the pack"
                )
        raise ShardDownloadError(
            f"cannot download shard {info.file} of pack {self.url!r} after "
            f"{self.retry.attempts} attempts ({type(last).__name__}: {last}); check that "
            "the store is reachable"
        )

    def _replaced_error(self, info: ShardInfo, how: str) -> PackFormatError:
        return PackFormatError(
            f"shard {info.file} of pack {self.url!r} is not the one this dataset's manifest "
            f"names: {how}. Make a new PackedDataset({self.url!r}) to read the pack now "
            "stored there"
        )

    def _replaced(self, info: ShardInfo) -> str | None:
        """How the pack at the URL differs from this cache's manifest, if it was replaced
        (re-packed) since that manifest was read; None if it was not, or cannot be told."""
        try:
            now = read_manifest(self.url, self.options, Retry(attempts=1))
        except PackFormatError:  # no manifest (a re-pack is uploading) or a broken one
            return (
                "the pack is being replaced (re-packed) since this dataset read its "
                "manifest: the URL's manifest is missing or unreadable now"
            )
        except Exception:
            return None
        if now.to_json() == self.manifest.to_json():
            return None
        return "the pack was replaced (re-packed) after this dataset read its manifest"

    def downloaded_bytes(self) -> int:
        """Bytes downloaded into this cache directory so far (every pack, every process)."""
        try:
            lines = (self.root / LOG_NAME).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return 0
        return sum(int(line.split()[1]) for line in lines if line.strip())


class Prefetcher:
    """Downloads the shards this process's reader will need next, a few at a time.

    ``plan`` is the shards in the order the epoch reads them; :meth:`advance` says how
    far the reader has come. Up to ``ahead`` shards past that point are downloaded (and
    held in use, so eviction leaves them alone) until the reader has passed them, or
    until the reading that started them ends or is abandoned (:meth:`stop`).
    """

    def __init__(self, cache: ShardCache, ahead: int) -> None:
        self.cache = cache
        self.ahead = max(1, ahead)
        self._pool = ThreadPoolExecutor(min(self.ahead, 8), thread_name_prefix="scramjet-prefetch")
        self._lock = threading.Lock()
        self._plan: list[int] = []
        self._cursor = 0
        self._jobs: dict[int, tuple[Future[None], _Locked | None]] = {}
        self._held: dict[int, _Locked] = {}
        self._generation = 0

    def start(self, plan: list[int]) -> int:
        """A new epoch (or a resumed one): forget the old plan and start on ``plan``.

        Returns the reading's generation, for :meth:`stop`.
        """
        with self._lock:
            self._generation += 1
            self._plan, self._cursor = plan, 0
            self._release(keep=set(plan[: self.ahead]))
            self._fill()
            return self._generation

    def stop(self, generation: int) -> None:
        """The reading ``generation`` (from :meth:`start`) ended or was abandoned: release
        the shards it holds and drop its queued downloads, unless a newer one started.

        Downloads already running finish and are let go at once, so under a
        ``cache_limit`` the room this reading held is free for other readers."""
        with self._lock:
            if generation != self._generation:
                return  # a newer reading owns the plan now
            self._generation += 1
            self._plan, self._cursor = [], 0
            self._release(keep=set())
            self._drop_queued()

    def _drop_queued(self) -> None:
        for k, (job, claimed) in list(self._jobs.items()):
            if job.cancel():  # never started: its claimed download lock is ours to release
                del self._jobs[k]
                if claimed is not None:
                    claimed.close()

    def advance(self, position: int) -> None:
        """The reader now reads ``plan[position]``."""
        with self._lock:
            if position <= self._cursor:
                return
            self._cursor = position
            self._release(keep=set(self._plan[max(0, position - 1) : position + self.ahead]))
            self._fill()

    def _fill(self) -> None:
        for k in self._plan[self._cursor : self._cursor + self.ahead]:
            if k not in self._jobs and k not in self._held:
                claimed = self.cache.claim(k)  # before the reader gets indices of k
                job = self._pool.submit(self._get, k, self._generation, claimed)
                self._jobs[k] = (job, claimed)

    def _get(self, k: int, generation: int, claimed: _Locked | None = None) -> None:
        try:
            _, held = self.cache.open(k, claimed)
        except Exception as exc:  # the reader's own request retries and reports it
            logger.info("prefetch of shard %d failed: %r", k, exc)
            with self._lock:
                self._jobs.pop(k, None)
            return
        with self._lock:
            self._jobs.pop(k, None)
            window = self._plan[max(0, self._cursor - 1) : self._cursor + self.ahead]
            if generation == self._generation and k in window:
                self._held[k] = held
                return
        held.close()

    def _release(self, keep: set[int]) -> None:
        for k in [k for k in self._held if k not in keep]:
            self._held.pop(k).close()

    def close(self) -> None:
        """Stop prefetching and release every held shard."""
        with self._lock:
            self._generation += 1
            self._plan = []
            self._release(keep=set())
            self._drop_queued()
        self._pool.shutdown(wait=False, cancel_futures=True)
