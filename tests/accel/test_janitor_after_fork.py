"""A DataLoader worker forked while a thread of its parent starts the dataset cache's
janitor (holding the janitor's lock) starts one of its own, rather than waiting forever
on a copy of that lock held by a thread the worker does not have."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from scramjet.accel import _janitor

fork = multiprocessing.get_context("fork")


def _watch_and_die(path: str) -> None:
    os._exit(0 if _janitor.watch(path) else 5)  # dies without removing it: its janitor does


def test_a_worker_forked_while_the_janitor_starts_has_its_own(tmp_path: Path) -> None:
    folder = tmp_path / "spill"
    folder.mkdir()
    with _janitor._lock:  # another thread of this process is starting its janitor
        worker = fork.Process(target=_watch_and_die, args=(str(folder),))
        worker.start()
        try:
            worker.join(20)
            assert worker.exitcode == 0, f"the worker never watched its folder ({worker.exitcode})"
        finally:
            if worker.is_alive():
                worker.kill()
    deadline = time.monotonic() + 20
    while folder.exists():  # the worker's own janitor removes what it left
        assert time.monotonic() < deadline, "the dead worker's folder was never removed"
        time.sleep(0.05)
