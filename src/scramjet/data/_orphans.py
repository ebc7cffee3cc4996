"""Worker processes that end with the process that started them.

A DataLoader worker checks that its parent lives only between batches: one blocked in a
read of ours (a shard download, or the wait for another process's download of it) would
outlive a parent killed by SIGKILL or the OOM killer, holding the cache's locks and its
memory. :func:`exit_with_parent` starts, once per worker process, a daemon thread that
polls the parent's id and ends the process when it changes (the parent died and the
worker was handed to another).
"""

from __future__ import annotations

import os
import threading
import time

from torch.utils.data import get_worker_info

_watched: int | None = None  # the id of the process whose parent is watched
_lock = threading.Lock()


def exit_with_parent(interval: float = 0.5) -> None:
    """In a DataLoader worker process: end it within ``interval`` seconds of its parent's
    death (once per process; elsewhere nothing happens)."""
    global _watched
    if _watched == os.getpid() or get_worker_info() is None:
        return
    with _lock:
        if _watched == os.getpid():
            return
        _watched = os.getpid()
        parent = os.getppid()
        threading.Thread(
            target=_watch, args=(parent, interval), name="scramjet-parent-watch", daemon=True
        ).start()


def _watch(parent: int, interval: float) -> None:
    while os.getppid() == parent:
        time.sleep(interval)
    os._exit(1)  # nothing to tidy: the next reader of the cache removes our .part files
