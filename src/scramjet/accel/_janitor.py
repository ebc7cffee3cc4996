"""Removes a process's dataset cache folders when that process dies, even by ``kill -9``.

A process that creates a cache removes its folders itself when it ends normally (the cache's
finalizer runs at exit). A process killed by SIGKILL or the out-of-memory killer runs nothing,
and its RAM segment (``/dev/shm``) and spill folder would stay until reboot. So the first cache
a process creates also starts a janitor: a small fresh interpreter (nothing of the caller is
forked or imported) that learns each folder to remove through a pipe and polls
``os.getppid()``; when the creator is gone the janitor removes the folders still listed and
exits. It runs in its own session, so a signal sent to the caller's process group (Ctrl-C,
``timeout``) reaches the caller but not the janitor.

Owner-death detection rather than a pipe's end of file: DataLoader workers and preloaders
forked from the creator inherit its end of the pipe and would keep it open. Rather than
``prctl(PR_SET_PDEATHSIG)``: that fires when the *thread* that started the janitor ends, and
it is Linux-only.
"""

from __future__ import annotations

import os
import sys
import threading

_POLL_S = 0.2

_BOOTSTRAP = r"""
import os, shutil, sys, threading, time
parent, paths, lock = int(sys.argv[1]), set(), threading.Lock()
def listen():
    for line in sys.stdin:
        op, path = line[:1], line[1:].rstrip("\n")
        with lock:
            paths.add(path) if op == "+" else paths.discard(path)
reader = threading.Thread(target=listen, daemon=True)
reader.start()
while os.getppid() == parent:
    time.sleep(float(sys.argv[2]))
reader.join(1.0)  # lines written just before the creator died are still in the pipe
with lock:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
"""

_lock = threading.Lock()
_janitor: tuple[int, int, int] | None = None  # (creator pid, janitor pid, write end of its pipe)


def _new_lock() -> None:
    """In a forked child (a DataLoader worker): a lock of its own, never a copy held by a
    thread of the parent that was starting its janitor at the fork."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock)


def _running() -> tuple[int, int, int] | None:
    """This process's janitor, if it is running."""
    if _janitor is None or _janitor[0] != os.getpid():
        return None
    try:
        pid, _ = os.waitpid(_janitor[1], os.WNOHANG)
    except ChildProcessError:
        return None
    return _janitor if pid == 0 else None


def _pipe() -> int | None:
    """The pipe to this process's janitor, started on first use; None when it cannot start."""
    global _janitor
    with _lock:
        running = _running()
        if running is not None:
            return running[2]
        # posix_spawn rather than subprocess.Popen: no Popen object is left to warn, at
        # interpreter exit, that its child still runs (it is meant to).
        read, write = os.pipe()
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            try:
                pid = os.posix_spawn(
                    sys.executable,
                    [sys.executable, "-I", "-S", "-c", _BOOTSTRAP, str(os.getpid()), str(_POLL_S)],
                    dict(os.environ),
                    file_actions=[
                        (os.POSIX_SPAWN_DUP2, read, 0),
                        (os.POSIX_SPAWN_DUP2, devnull, 1),
                        (os.POSIX_SPAWN_DUP2, devnull, 2),
                    ],
                    setsid=True,
                )
            finally:
                os.close(devnull)
                os.close(read)
        except (OSError, AttributeError):  # no posix_spawn, or the interpreter cannot start
            os.close(write)
            return None
        _janitor = (os.getpid(), pid, write)
        return write


def _send(line: str) -> bool:
    fd = _pipe()
    if fd is None:
        return False
    try:
        os.write(fd, line.encode() + b"\n")
    except OSError:
        return False
    return True


def watch(path: str) -> bool:
    """Remove ``path`` if this process dies before :func:`forget` is called for it.

    Returns False when no janitor could be started (the folder is then only removed by a
    normal exit).
    """
    if "\n" in path:  # the pipe carries one path per line
        return False
    return _send("+" + path)


def forget(path: str) -> None:
    """This process removed ``path`` itself: the janitor need not."""
    if _running() is not None:
        _send("-" + path)


def janitor_pid() -> int | None:
    """The pid of this process's janitor, if one is running (for tests)."""
    running = _running()
    return None if running is None else running[1]
