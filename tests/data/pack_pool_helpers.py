"""Encoding tasks that fail on purpose, for pack's thread and process pools (helpers).

Pack's worker processes import these by reference, so they live in a module of their own.
"""

from __future__ import annotations

import os
from typing import Any

from scramjet.data.writer import _encode_task


def encode_or_raise(task: tuple[Any, ...]) -> tuple[int, Any]:
    """Pack's encoding task, except that it raises on a file named ``raise*``.

    The exception escapes the task (unlike a decoder error, which the task reports as a
    bad row), as an unexpected failure inside a worker would.
    """
    for path in task[1]:
        if os.path.basename(path).startswith("raise"):
            raise RuntimeError(f"decoder state corrupted by {os.path.basename(path)}")
    return _encode_task(task)  # type: ignore[arg-type]


def where_am_i(task: tuple[Any, ...]) -> tuple[int, Any]:
    """A task that reports the worker it ran in: pid, parent pid, and what it imported."""
    import sys
    import time

    time.sleep(task[1])  # uneven task times: results must still come back in order
    main = sys.modules.get("__main__")
    return task[0], (
        os.getpid(),
        os.getppid(),
        "torch" in sys.modules,
        getattr(main, "__file__", None),
    )


def die_on(task: tuple[int, int, float]) -> int:
    """Sleeps ``task[2]`` s and returns the task's index; the worker is SIGKILLed instead
    on task ``task[1]``."""
    import signal
    import time

    if task[0] == task[1]:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(task[2])
    return task[0]


def heap_faults(task: tuple[int, int]) -> tuple[int, float]:
    """Page faults per image while the worker makes and drops ``task[1]`` 224 x 224 RGB
    images the way an encoding task does (a Pillow resize output, then freed)."""
    import resource

    from PIL import Image

    src = Image.new("RGB", (256, 256), (10, 20, 30))
    src.resize((224, 224))  # warm: the first image may grow the heap once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(task[1]):
        src.resize((224, 224))
    return task[0], (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / task[1]


def blas_threads(task: tuple[int]) -> tuple[int, tuple[int, str | None]]:
    """Worker task: this process's thread count once numpy is imported, and the
    OPENBLAS_NUM_THREADS it was started with."""
    import numpy  # noqa: F401  (starts OpenBLAS's threads, as many as it is allowed)

    with open("/proc/self/status") as fh:
        threads = next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))
    return task[0], (threads, os.environ.get("OPENBLAS_NUM_THREADS"))
