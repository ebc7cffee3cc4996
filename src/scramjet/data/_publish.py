"""Where :func:`scramjet.data.pack` may write, and how a finished pack is moved into place.

A pack is written into a hidden ``.<dst>.partial-<id>`` folder next to ``dst``, locked
(``flock`` on the folder) by its writer until it ends; one that nobody holds was left by
a writer killed mid-way (SIGKILL, OOM) and is removed by the next pack into ``dst``.

``overwrite=True`` replaces what an earlier pack left at ``dst`` (a pack directory, an
HDF5/npz file as nebulae's generator writes, a link), never the user's own files: the
folder or list being packed, a folder of other files, or a file of another kind.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import sys
import uuid
import warnings
from pathlib import Path

from scramjet.data.format import MANIFEST_NAME, fsync_dir

#: Files that a pack (or nebulae's single-file pack) may be: replaced by ``overwrite``.
PACK_FILE_SUFFIXES = (".h5", ".hdf5", ".npz")


def check_destination(out: Path, root: Path, file_list: Path, overwrite: bool) -> None:
    """Refuse a ``dst`` that would replace the sources, or anything but a pack.

    ``overwrite`` replaces an earlier pack (a directory with a manifest, or one holding only
    HDF5 files, as a killed or older writer leaves), an HDF5/npz file or a link; never the
    folder or list being packed, a folder of other files, nor a file of another kind.
    """
    where = Path(os.path.realpath(out.parent)) / out.name  # a link itself is replaced
    for source in (root, file_list.resolve()):
        if where == source or where in source.parents:
            raise FileExistsError(
                f"dst {str(out)!r} is, or holds, the file_dir or file_list being packed "
                f"({str(source)!r}); writing the pack there would replace them. Choose a "
                "dst outside them (a new folder inside file_dir, like 'photos/photos.pack', "
                "is fine)"
            )
    if not (out.exists() or out.is_symlink()):
        return
    if not overwrite:
        raise FileExistsError(f"{str(out)!r} already exists; remove it or pass overwrite=True")
    if out.is_symlink() or (out.is_dir() and (out / MANIFEST_NAME).is_file()):
        return
    if not out.is_dir():
        if out.suffix.lower() in PACK_FILE_SUFFIXES:
            return
        raise FileExistsError(
            f"{str(out)!r} is a file that is not a pack (a pack is a folder, or a "
            f"{'/'.join(PACK_FILE_SUFFIXES)} file as nebulae writes); overwrite=True replaces "
            "packs only, never other files. Choose another dst, or remove that file yourself"
        )
    others = sorted(
        p.name for p in out.iterdir() if not (p.is_file() and p.suffix in (".h5", ".hdf5"))
    )
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise FileExistsError(
            f"{str(out)!r} is a folder that is not a pack (no {MANIFEST_NAME}; it holds "
            f"{shown}); overwrite=True replaces packs only, never other folders. Choose "
            "another dst, or remove that folder yourself"
        )


def partial_folder(out: Path) -> tuple[Path, int]:
    """A new hidden folder next to ``out`` to write the pack into, and a descriptor that
    holds its lock: close it when the pack is published or given up. The folders that
    earlier, killed writers left for ``out`` (no lock held) are removed first."""
    for entry in out.parent.glob(f".{out.name}.partial-*"):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:  # a live writer holds it
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            else:
                shutil.rmtree(entry, ignore_errors=True)
            finally:
                os.close(fd)
    tmp = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # nobody else knows the folder yet: taken at once
    return tmp, fd


def publish(tmp: Path, out: Path, overwrite: bool) -> None:
    """Move the finished pack into place; what was at ``out`` is swapped out, then removed.

    On Linux the two are exchanged in one step (``renameat2(RENAME_EXCHANGE)``): a reader
    opening ``out`` meanwhile finds the old pack or the new one, never nothing. Where the
    system or filesystem cannot exchange, the old one is moved aside, then the new one in.
    A link at ``out`` (one whose target is gone included) is moved aside as a link: the
    pack takes its place, and what it pointed to is left alone. What earlier overwrites
    killed mid-way left aside (``.<dst>.old-*``) is removed too.
    """
    old = None
    if out.exists() or out.is_symlink():
        if not overwrite:
            raise FileExistsError(f"{str(out)!r} appeared while packing; nothing was replaced")
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
        if _exchange(tmp, out):
            os.rename(tmp, old)  # ``tmp`` holds what was at ``out`` now
        else:
            os.rename(out, old)
            os.rename(tmp, out)
    else:
        os.rename(tmp, out)
    fsync_dir(out.parent)
    if old is not None:
        _remove_old(old)
    # What an earlier overwrite killed before it finished deleting left aside: ``out``
    # holds a finished pack now, so none of it is needed any more.
    for leftover in out.parent.glob(f".{out.name}.old-*"):
        _remove_old(leftover)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` atomically (Linux ``renameat2``); ``False`` where that is not
    possible (another system, a C library without it, a filesystem that refuses it: the
    caller then moves them one after the other, which reports any error of its own)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a C library older than glibc 2.28
        return False
    renameat2.argtypes = (
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    )
    renameat2.restype = ctypes.c_int
    # EINVAL (a filesystem without exchange), ENOSYS (an older kernel): ``False``.
    return bool(
        renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0
    )


def _remove_old(old: Path) -> None:
    """Delete what ``dst`` held before: a directory tree, or a file (or link) by unlink.

    The new pack is already in place, so a failure here only warns, naming the leftover.
    """
    try:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
    except OSError as exc:
        warnings.warn(
            f"the new pack is in place, but what was at dst before could not be removed "
            f"from {str(old)!r} ({exc}); delete it by hand",
            RuntimeWarning,
            stacklevel=4,
        )
