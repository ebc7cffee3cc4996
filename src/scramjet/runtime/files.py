"""Crash-safe file writes: a reader sees the old file or the complete new one, never half.

:func:`atomic_write` writes to a temporary file in the same directory (named
``.tmp-<name>.<pid>.<random>``, ``<name>`` shortened where a long one would not fit),
fsyncs it, renames it over the target with :func:`os.replace` and fsyncs the directory.
A process killed in the middle leaves only the temporary file, which readers ignore. A
replaced file keeps its permission bits. :func:`atomic_write_bytes` and
:func:`atomic_write_text` are the same write for data already in memory.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from scramjet.runtime.processes import pid_alive

__all__ = [
    "digest_stem",
    "safe_stem",
    "TMP_PREFIX",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "fsync_dir",
    "temporary_writer",
    "why_not_writable",
]

TMP_PREFIX = ".tmp-"

# fsync of a directory is not supported on this file system (nothing to flush then).
_NO_DIR_FSYNC = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EBADF})


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Flush a directory entry to disk (a rename is only durable after this).

    Args:
        directory: The directory whose entries changed. No-op where directories cannot
            be opened (Windows) or fsynced (file systems that answer ``EINVAL``/``ENOTSUP``,
            as PostgreSQL also tolerates); other errors, e.g. ``EIO``, are raised.
    """
    if os.name != "posix":  # pragma: no cover
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _NO_DIR_FSYNC:
            raise
    finally:
        os.close(fd)


class _SyncAheadWriter:
    """File wrapper that starts flushing to disk while the rest is still being written.

    Every ``every`` bytes an ``fdatasync`` runs in a helper thread (one at a time), so
    disk writes overlap with serialisation and the final fsync has little left to do.
    """

    def __init__(self, file: BinaryIO, every: int = 32 << 20) -> None:
        self._file = file
        self._every = every
        self._pending = 0
        self._thread: threading.Thread | None = None

    def write(self, data: Any) -> int:
        written = self._file.write(data)
        self._pending += written
        if self._pending >= self._every and not (self._thread and self._thread.is_alive()):
            self._file.flush()  # hand the bytes to the OS before asking it to sync them
            self._pending = 0
            self._thread = threading.Thread(target=os.fdatasync, args=(self._file.fileno(),))
            self._thread.start()
        return written

    def flush(self) -> None:
        self._file.flush()

    def wait(self) -> None:
        """Wait for the helper thread (before the file is closed, even on errors)."""
        if self._thread is not None:
            self._thread.join()

    def sync(self) -> None:
        """Flush and fsync everything written so far."""
        self._file.flush()
        self.wait()
        os.fsync(self._file.fileno())


# The longest file name most file systems take (ext4, xfs, btrfs, tmpfs: 255 bytes).
_NAME_MAX = 255


def _temporary_path(path: Path) -> Path:
    """``.tmp-<name>.<pid>.<random>`` next to ``path``, ``<name>`` shortened from its end
    when the whole would be longer than a file name may be (the target's own name may
    already be close to the limit)."""
    tail = f".{os.getpid()}.{uuid.uuid4().hex[:8]}"
    name = path.name
    while name and len(os.fsencode(f"{TMP_PREFIX}{name}{tail}")) > _NAME_MAX:
        name = name[:-1]
    return path.with_name(f"{TMP_PREFIX}{name}{tail}")


def _open_temporary(tmp: Path, path: Path) -> BinaryIO:
    """``tmp`` opened for writing; a missing folder is reported as ``path``'s, not as the
    hidden temporary's."""
    try:
        return open(tmp, "wb")
    except FileNotFoundError as error:
        if path.parent.is_dir():
            raise
        raise FileNotFoundError(
            errno.ENOENT,
            f"cannot write {str(path)!r}: its folder {str(path.parent)!r} does not exist. "
            f"Create it first, e.g. Path({str(path.parent)!r}).mkdir(parents=True, "
            f"exist_ok=True)",
        ) from error


def _keep_mode(path: Path, fd: int) -> None:
    """Give the temporary file ``fd`` the permission bits of the file it will replace (a
    file readable by its owner only stays so); a new file keeps the usual ones (umask)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # no file there yet (or not readable): nothing to keep
        return
    if stat.S_ISREG(mode):
        os.fchmod(fd, stat.S_IMODE(mode))


def atomic_write(
    path: str | os.PathLike[str], write: Callable[[Any], object], *, fsync: bool = True
) -> None:
    """Replace ``path`` with what ``write(file)`` writes, atomically.

    Args:
        path: Final file name.
        write: Called once with a binary file-like object (``write``/``flush``), e.g.
            ``lambda f: torch.save(obj, f)`` or ``lambda f: f.write(data)``.
        fsync: Make the new file and its directory entry durable before returning.
            Without it the replacement is still atomic for readers, but a power loss
            may bring back the previous file.

    Raises:
        Whatever ``write`` raises; the temporary file is removed and ``path`` is untouched.

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "note.txt"
        >>> atomic_write(target, lambda f: f.write(b"saved"))
        >>> target.read_text()
        'saved'
    """
    path = Path(path)
    tmp = _temporary_path(path)
    try:
        with _open_temporary(tmp, path) as file:
            _keep_mode(path, file.fileno())
            if fsync:
                writer = _SyncAheadWriter(file)
                try:
                    write(writer)
                    writer.sync()
                finally:
                    writer.wait()
            else:
                write(file)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data``, atomically (:func:`atomic_write` of one write).

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "blob.bin"
        >>> atomic_write_bytes(target, b"\\x00\\x01", fsync=False)
        >>> target.read_bytes()
        b'\\x00\\x01'
    """
    atomic_write(path, lambda file: file.write(data), fsync=fsync)


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, fsync: bool = True, encoding: str = "utf-8"
) -> None:
    """Replace ``path`` with ``text`` encoded as ``encoding``, atomically.

    Line endings are written as given (no ``\\n`` translation), as in a file opened
    with ``newline=""``.

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "note.txt"
        >>> atomic_write_text(target, "héllo\\n")
        >>> target.read_text(encoding="utf-8")
        'héllo\\n'
    """
    atomic_write_bytes(path, text.encode(encoding), fsync=fsync)


def temporary_writer(path: str | os.PathLike[str]) -> int | None:
    """The pid of the live process of this machine that is writing the temporary file
    ``path`` (an :func:`atomic_write` temporary, whose name carries its writer's pid), or
    None when it is left over: its writer ended, or no longer holds it open.

    Without ``/proc`` (not Linux) a live pid counts as writing. A temporary written from
    another machine (a shared file system) cannot be told apart from a left-over one.
    """
    parts = Path(path).name.rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    pid = int(parts[1])
    if not pid_alive(pid):
        return None
    handles = Path(f"/proc/{pid}/fd")
    if not Path("/proc/self/fd").is_dir():
        return pid
    target = os.path.realpath(path)
    try:
        with os.scandir(handles) as entries:
            for entry in entries:
                try:
                    if os.readlink(entry.path) == target:
                        return pid
                except OSError:  # closed since the listing
                    continue
    except PermissionError:  # another user's process: it may be writing
        return pid
    except OSError:  # ended since pid_alive
        return None
    return None


def why_not_writable(folder: str | os.PathLike[str]) -> str | None:
    """Why files cannot be written into ``folder`` (created if missing), found by creating
    it and an empty temporary file in it (a read-only mount, missing permissions, a file
    in the way); None when that works. The temporary is named as :func:`atomic_write`'s,
    so one left by a killed process is removed as theirs are."""
    folder = Path(folder)
    probe = folder / f"{TMP_PREFIX}write-check.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as error:
        return f"{type(error).__name__}: {error}"
    return None


def why_not_creatable(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` (a file or folder to create, with any missing parent folders) cannot
    be made: its first existing ancestor is a file, or a folder this process cannot write.
    None when nothing stands in the way that can be seen beforehand."""
    parent = Path(path).absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # the first existing folder: the rest would be created
    if not parent.is_dir():
        return f"cannot create {str(path)!r}: {str(parent)!r} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create {str(path)!r}: the folder {str(parent)!r} is not writable"
    return None


# ``\w`` of a str pattern is any letter or digit, so ``損失`` stays as it is.
_UNSAFE_IN_NAMES = re.compile(r"[^\w.-]+")


def safe_stem(name: str) -> str:
    """A file-name-safe stem for ``name``: letters of any script, digits, ``.``, ``-``
    and ``_`` are kept, every other run of characters becomes ``_``.

    A stem of dots alone (``.``, ``..``: the folder itself or its parent) is ``metric``
    too.

    Example:
        >>> safe_stem("val/acc 1"), safe_stem("損失"), safe_stem("//"), safe_stem("..")
        ('val_acc_1', '損失', 'metric', 'metric')
    """
    stem = _UNSAFE_IN_NAMES.sub("_", name).strip("_")
    return stem if stem.strip(".") else "metric"


def digest_stem(stem: str, name: str, max_bytes: int) -> str:
    """``stem`` cut to at most ``max_bytes`` UTF-8 bytes in all, ending in ``-`` and 8 hex
    digits of ``name``'s SHA-1: a stem of its own for names whose safe stems are alike
    or too long for a file name.

    Example:
        >>> digest_stem("val_acc", "val/acc", 100)
        'val_acc-76c8b4d4'
    """
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{stem.encode()[: max_bytes - 9].decode(errors='ignore')}-{digest}"
