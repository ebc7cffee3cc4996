"""Process helpers: whether a process is alive, and a socket-sized temp folder for workers."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import warnings
from multiprocessing import util as mp_util

# What multiprocessing appends to its temp folder for a socket: "/pymp-" and
# "/listener-", each followed by 8 random characters.
_SOCKET_SUFFIX = 32
_SHORT_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
_lock = threading.Lock()
_warned = False


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists (a process of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _socket_path_limit() -> int | None:
    """The longest socket path this system binds, in bytes; None where sockets are not files."""
    if sys.platform.startswith("linux"):
        return 107  # sun_path holds 108 bytes, its NUL included
    if sys.platform == "darwin" or "bsd" in sys.platform:
        return 103
    return None


def _fits(folder: str, limit: int) -> bool:
    return len(os.fsencode(folder)) + _SOCKET_SUFFIX <= limit


def fit_socket_tempdir() -> str | None:
    """Give worker processes a temp folder short enough for their sockets.

    A DataLoader worker hands each batch's tensors to the training process through a socket
    file in multiprocessing's temp folder (``$TMPDIR/pymp-*``). Python before 3.13 does not
    check that path's length: with a ``TMPDIR`` longer than about 75 characters the worker
    fails to bind the socket, prints ``OSError: AF_UNIX path too long`` and the training
    process waits for that batch forever. Python 3.13 moves the folder somewhere shorter
    itself; this does the same for older versions, before any worker is forked, so workers
    (which inherit the choice) never meet the limit. ``TMPDIR`` and everything else that
    uses the temp folder are left as they are.

    Returns the folder multiprocessing now uses when one had to be chosen, else ``None``.
    Warns (once) when no short folder is writable, naming the fix.
    """
    limit = _socket_path_limit()
    if limit is None or sys.version_info >= (3, 13) or _fits(tempfile.gettempdir(), limit):
        return None
    with _lock:
        for base in _SHORT_FOLDERS:
            if _fits(base, limit) and os.access(base, os.W_OK | os.X_OK):
                saved = tempfile.tempdir
                tempfile.tempdir = base  # get_temp_dir makes its folder under this once
                try:
                    folder = mp_util.get_temp_dir()  # an existing choice is returned as it is
                finally:
                    tempfile.tempdir = saved
                if _fits(folder, limit):
                    return folder
                break
        _warn_too_long(limit)
    return None


def _warn_too_long(limit: int) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(
        f"the temp folder {tempfile.gettempdir()!r} is too long for worker processes' "
        f"sockets on Python {sys.version_info.major}.{sys.version_info.minor}: a socket "
        f"path there would exceed {limit} bytes, and DataLoader workers that pass tensors "
        "would fail to deliver their batches. Set TMPDIR to a shorter folder (for example "
        "/tmp), or use num_workers=0 / the threaded loader.",
        RuntimeWarning,
        stacklevel=3,
    )
