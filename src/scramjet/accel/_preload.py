"""Background preloaders for the dataset cache: decode samples before the loop asks for them.

A preloader is a forked process where ``os.fork`` is available on Linux (Python threads only
run one decode at a time: PIL and NumPy release the GIL for part of the work, not all of it),
and a thread elsewhere. One set of preloaders serves one cache, whichever process (main or
DataLoader worker) started it: the store's slot table says how many are alive, and a process
only starts the missing ones. A preloader claims each sample before decoding it, exactly as a
reader does, so no index is ever decoded twice; it first decodes the indices that readers
posted as hints (the rest of the batch being read), then walks the remaining indices, and
ends as soon as nothing is left to claim. A finished cache therefore has no background
process or thread left, and readers see it complete through one counter in the index.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import torch

from scramjet.accel._store import EMPTY, NONE, SharedStore
from scramjet.runtime.processes import pid_alive


class _Owner(Protocol):
    spill: bool

    def store_one(self, i: int, load: Callable[[int], Any]) -> tuple[Any, int]: ...


def preloader_count(requested: int) -> int:
    """How many preloaders to run: at most ``requested``, sized to the cores readers leave.

    Readers are the DataLoader workers (or the main process with ``num_workers=0``); at least
    one preloader runs when any is requested, since readers often wait on an accelerator.
    """
    if requested <= 0:
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    info = torch.utils.data.get_worker_info()
    readers = info.num_workers if info is not None else 1
    return min(requested, max(1, cpus - readers))


def use_processes() -> bool:
    """Fork preloader processes (Linux); elsewhere fork is unsafe or missing: threads."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def start_preloaders(
    cache: _Owner, store: SharedStore, load: Callable[[int], Any], requested: int
) -> list[Any]:
    """Start the preloaders ``cache`` (over ``store``) is missing; returns the threads started."""
    if store.complete():
        return []
    count = store.reserve_preloaders(preloader_count(requested))
    n, parent, threads = store.n, os.getpid(), []
    for k in range(count):
        start = k * n // count if count else 0
        if use_processes():
            _fork(cache, store, load, start, parent)
        else:
            t = threading.Thread(
                target=_thread_main,
                args=(cache, store, load, start, parent),
                name="scramjet-preload",
                daemon=True,
            )
            t.start()
            threads.append(t)
    return threads


def _fork(
    cache: _Owner, store: SharedStore, load: Callable[[int], Any], start: int, parent: int
) -> None:
    with warnings.catch_warnings():  # Python >= 3.12 warns about forking with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: decode, then leave without running the parent's exit hooks
        code = 1
        try:
            torch.set_num_threads(1)
            store.set_preloader(parent, os.getpid())
            preload_loop(cache, store, load, start)
            code = 0
        except BaseException:
            pass
        finally:
            with contextlib.suppress(BaseException):
                store.set_preloader(os.getpid(), 0)
            os._exit(code)
    # A thread blocked in waitpid holds no lock and costs nothing; it reaps the child (no
    # zombie left in a long-lived process) and ends with it.
    threading.Thread(target=_reap, args=(pid,), name="scramjet-reap", daemon=True).start()


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


def _thread_main(
    cache: _Owner, store: SharedStore, load: Callable[[int], Any], start: int, parent: int
) -> None:
    try:
        preload_loop(cache, store, load, start)
    finally:
        store.set_preloader(parent, 0)


def preload_loop(cache: _Owner, store: SharedStore, load: Callable[[int], Any], start: int) -> None:
    """Decode hinted indices first, then walk all indices from ``start``; end when none is
    left to claim, when the cache is removed, or when its owner process is gone."""
    n, owner = store.n, store.owner_pid()
    seen = 0  # hints already served are skipped by their state: one array lookup each
    cursor = 0
    while True:
        hints, seen = store.hints_since(seen)
        if hints:
            candidates = hints
        elif cursor < n:
            candidates, cursor = [(start + cursor) % n], cursor + 1
        else:
            return
        for i in candidates:
            if store.state(i) != EMPTY:
                continue
            if not store.exists() or not pid_alive(owner):
                return
            if not store.try_claim(i):
                continue
            try:
                _, tier = cache.store_one(i, load)
            except Exception:
                return  # the reader loads it again and reports the error itself
            if tier == NONE and not cache.spill:
                return  # memory budget full and nothing spills: decoding more is wasted
