"""Encoding pools for :func:`scramjet.data.pack`: threads or processes, in order.

:func:`results` runs an encoding function over tasks in bounded, ordered chunks on a
thread pool or a process pool and turns every way a worker can fail into an exception
that names its task: :class:`TaskFailed` (the task raised) or :class:`WorkerDied` (a
worker process died, with its signal or exit code and the task it was on).
:func:`main_module_frame` and :func:`unguarded_line` tell whether worker processes would
re-run the call (a script that calls ``pack`` at its top level without a main guard).

Worker processes never outlive the process that runs ``pack``, even when it is killed
(``kill -9``, the OOM killer) and cannot stop them. Each worker watches a lifeline: the
read end of a pipe whose only write end stays in the pack process, so the pipe reaches
end of file the moment that process is gone, and a watchdog thread in the worker then
ends the worker at once. Without it a worker would wait forever for its next chunk (it
holds both ends of its own task queue, so that queue never reports end of file), and it
would keep multiprocessing's fork server and resource tracker alive too, since those end
only when no process holds their pipes, and the workers hold them; all of them would keep
the caller's stdout and stderr open (``scramjet pack ... | cat`` would never end). Once
the workers are gone, those two helpers end by themselves. The parent pid cannot serve
as the signal: a worker's parent is the fork server, which outlives the pack process for
as long as any worker does. A pipe alone can be held open by a process forked from the
pack process while the pool runs (it inherits the write end), so the watchdog also ends
the worker when the pack process's pid no longer exists.
"""

from __future__ import annotations

import ast
import itertools
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection
from pathlib import Path
from types import FrameType
from typing import Any

POOLS = ("threads", "processes")
_CHUNKS_PER_WORKER = 4  # chunks submitted ahead per worker: bounds memory, keeps workers busy
_WATCHDOG_S = 0.5  # how often a worker checks that the pack process's pid still exists

# In a worker process only: shared [pid, task, pid, task, ...], one pair per worker, where
# each worker records the task it is encoding (-1 between chunks), so that the parent can
# name the row a worker was on when it died.
_SLOTS: Any = None
_SLOT = -1


class WorkerDied(Exception):
    """Internal: the encoding pool broke.

    ``indices`` are the tasks whose result was lost; ``ends`` says how each worker that
    failed ended, with the task it was encoding (None: between tasks, or unknown).
    """

    def __init__(self, indices: list[int], ends: list[tuple[str, int | None]]) -> None:
        super().__init__(ends)
        self.indices = indices
        self.ends = ends


class TaskFailed(Exception):
    """Internal: encoding task ``index`` raised; ``detail`` is the exception, as text.

    Raised inside a worker and picklable (its arguments are its state), so a process
    pool hands it back like a thread pool does.
    """

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(index, detail)
        self.index = index
        self.detail = detail


def _init_worker(slots: Any, lock: Any, pack_pid: int, lifeline: Connection) -> None:
    """Worker process initializer: watch the pack process, then claim a slot."""
    threading.Thread(
        target=_watch_pack,
        args=(pack_pid, lifeline),
        name="scramjet-pack-watchdog",
        daemon=True,
    ).start()
    _claim_slot(slots, lock)


def _watch_pack(pack_pid: int, lifeline: Connection) -> None:
    """Worker watchdog thread: end this process as soon as the pack process is gone.

    Nothing is ever sent on ``lifeline``: it becomes readable only at end of file, when
    the last holder of its write end (the pack process) has closed it or died.
    """
    while True:
        try:
            if lifeline.poll(_WATCHDOG_S):
                break
        except OSError:
            break
        try:
            os.kill(pack_pid, 0)
        except ProcessLookupError:
            break
        except PermissionError:  # another user's process: the pid was reused, pack is gone
            break
    os._exit(0)  # the pack process is gone: nobody waits for this worker's results


def _claim_slot(slots: Any, lock: Any) -> None:
    """Take a free (pid, task) pair of the shared slots, in a new worker process."""
    global _SLOTS, _SLOT
    with lock:
        for k in range(0, len(slots), 2):
            if slots[k] == 0:
                slots[k], slots[k + 1] = os.getpid(), -1
                _SLOTS, _SLOT = slots, k
                return


def run_chunk(fn: Callable[[Any], Any], chunk: list[Any]) -> list[Any]:
    """Worker: run ``fn`` on every task of a chunk (one round trip per chunk).

    An exception names its task, so the error can name the CSV row that raised.
    """
    out = []
    for task in chunk:
        if _SLOTS is not None:
            _SLOTS[_SLOT + 1] = task[0]
        try:
            out.append(fn(task))
        except Exception as exc:
            raise TaskFailed(task[0], f"{type(exc).__name__}: {exc}") from exc
    if _SLOTS is not None:
        _SLOTS[_SLOT + 1] = -1
    return out


def _start_pool(pool: str, workers: int) -> tuple[Executor, Any, Connection | None]:
    """A thread pool, or a process pool, its workers' shared (pid, task) slots and the
    write end of their lifeline (close it once the workers have ended)."""
    if pool == "threads":
        return ThreadPoolExecutor(workers, thread_name_prefix="scramjet-pack"), None, None
    # Workers come from a fork server (a fresh interpreter), never a fork of this process:
    # a fork of a process with threads (DataLoader, uploads, torch) can inherit a held lock
    # and hang.
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    slots = ctx.RawArray("q", 2 * workers)
    # Workers get the read end of their lifeline; the write end stays here (it is not
    # inheritable, so no program this process starts gets it), so its death ends them.
    lifeline, alive = ctx.Pipe(duplex=False)
    executor = ProcessPoolExecutor(
        workers,
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(slots, ctx.Lock(), os.getpid(), lifeline),
    )
    return executor, slots, alive


def _processes(executor: Executor) -> list[Any]:
    """The worker processes a process pool has started (none for a thread pool)."""
    return list((getattr(executor, "_processes", None) or {}).values())


def _stop_pool(executor: Executor) -> None:
    """Cancel queued chunks; end worker processes now, or wait for running threads.

    Threads cannot be killed: each finishes the chunk it holds (at most 16 rows).
    """
    if isinstance(executor, ThreadPoolExecutor):
        executor.shutdown(wait=True, cancel_futures=True)
        return
    procs = _processes(executor)
    executor.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)


def results(fn: Callable[[Any], Any], tasks: list[Any], workers: int, pool: str) -> Generator[Any]:
    """Run ``fn`` on every task (``task[0]`` is its index) and yield the results in order.

    With more than one worker, chunks of tasks go to a thread or process pool, at most
    ``_CHUNKS_PER_WORKER`` per worker ahead of the chunk being read, so memory stays
    bounded however long the list. A task that raises raises :class:`TaskFailed`. A
    worker process that dies (killed by the OOM killer, a crashing decoder) or cannot
    start breaks the pool: that raises :class:`WorkerDied` naming the tasks still in
    flight and how the processes ended, instead of waiting forever for their results.
    """
    if workers <= 1 or len(tasks) < 2:
        for task in tasks:
            yield from run_chunk(fn, [task])
        return
    # A chunk is one round trip to a worker process; threads take a row or two at a time,
    # so the last chunks of a pack keep every thread busy to the end.
    size = max(1, min(16 if pool == "processes" else 2, len(tasks) // (workers * 8)))
    chunks = iter([tasks[i : i + size] for i in range(0, len(tasks), size)])
    executor, slots, alive = _start_pool(pool, workers)
    pending: deque[tuple[list[Any], Future[list[Any]]]] = deque()

    def submit(count: int) -> None:
        for chunk in itertools.islice(chunks, count):
            pending.append((chunk, executor.submit(run_chunk, fn, chunk)))

    procs: list[Any] = []
    try:
        try:
            try:
                submit(workers * _CHUNKS_PER_WORKER)
                procs = _processes(executor)
                while pending:
                    done = pending[0][1].result()
                    pending.popleft()
                    submit(1)
                    yield from done
            except BrokenProcessPool as exc:
                lost = [
                    task[0]
                    for chunk, future in pending
                    if not future.done() or future.exception() is not None
                    for task in chunk
                ]
                # A worker that dies at once breaks the pool before the first submits return
                procs = procs or _processes(executor)
                raise WorkerDied(lost, _how_workers_ended(executor, procs, slots)) from exc
        except BaseException:
            _stop_pool(executor)
            raise
        executor.shutdown(wait=True)
    finally:
        if alive is not None:  # the workers have ended (or were told to): let go of them
            alive.close()


def _how_workers_ended(
    executor: Executor, procs: list[Any], slots: Any
) -> list[tuple[str, int | None]]:
    """How each worker process that failed ended, and the task it was encoding.

    When one worker dies the pool terminates the others (SIGTERM), so those are named
    only when nothing else is known.
    """
    deadline = time.monotonic() + 10  # the pool ends and joins them; wait for their codes
    # The pool's manager thread joins the workers itself. Wait for it first: a fork server
    # worker's exit code is read once from a pipe, so two threads polling the same worker
    # race, and the loser sees end of file and records exit code 255 instead.
    manager = getattr(executor, "_executor_manager_thread", None)
    if manager is not None:
        manager.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    on_task = {slots[k]: slots[k + 1] for k in range(0, len(slots), 2) if slots[k]}
    failed = [p for p in procs if p.exitcode not in (None, 0)]
    first = [p for p in failed if p.exitcode != -signal.SIGTERM] or failed
    ends = []
    for proc in first:
        code = proc.exitcode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"a worker was killed by {name}{_SIGNAL_CAUSES.get(name, '')}"
        else:
            how = (
                f"a worker exited with code {code} (a Python error in the worker process: "
                "its traceback is printed above, on stderr)"
            )
        task = on_task.get(proc.pid, -1)
        ends.append((how, task if task >= 0 else None))
    return ends


_SIGNAL_CAUSES = {
    "SIGKILL": ", as the out-of-memory killer does",
    "SIGSEGV": ", a crash in native code such as an image decoder",
    "SIGBUS": ", a crash in native code such as an image decoder",
    "SIGABRT": ", an abort in native code such as an image decoder",
}


def main_module_frame() -> FrameType | None:
    """The frame running the main script's top-level code, if this call comes from it."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if frame.f_code.co_name == "<module>" and name in ("__main__", "__mp_main__"):
            return frame
        frame = frame.f_back
    return None


def unguarded_line(frame: FrameType) -> str | None:
    """``"file:line"`` when the script's current top-level statement is not the guard.

    ``None`` when there is no script file to re-run (``python -c``, a notebook) or its
    source cannot be read.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or frame.f_globals is not vars(main):
        return None
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    for node in tree.body:
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return None if _is_main_guard(node) else f"{path}:{line}"
    return None


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either operand order)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    consts = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and consts == ["__main__"]
