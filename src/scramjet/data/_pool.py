"""Encoding pools for :func:`scramjet.data.pack`: threads or worker processes, in order.

:func:`results` runs an encoding function over tasks in bounded, ordered chunks on a
thread pool or on worker processes and turns every way a worker can fail into an
exception that names its task: :class:`TaskFailed` (the task raised) or
:class:`WorkerDied` (a worker process died, with its signal or exit code and the task it
was on).

Worker processes are fresh interpreters started with ``subprocess`` (POSIX), never forks
and never through :mod:`multiprocessing`: they import scramjet's encoding code and
nothing of the caller's program, so they start in a fraction of a second even when the
calling script imports torch, and a script that calls ``pack`` at its top level without
an ``if __name__ == "__main__":`` guard is never run a second time. Each worker talks to
the pack process over one socket pair: it receives chunks of tasks and sends one message
per task, so the parent always knows which task a worker was on when it died.

Worker processes never outlive the process that runs ``pack``, even when it is killed
(``kill -9``, the OOM killer) and cannot stop them: a thread in each worker reads the
socket, and the socket reaches end of file the moment the pack process is gone, which
ends the worker at once. The socket's pack-side end is not inheritable, so no program the
pack process starts holds it open; and since a process forked from the pack process
would inherit it, the thread also ends the worker when its parent changes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any, NoReturn

POOLS = ("threads", "processes")
_CHUNKS_PER_WORKER = 4  # chunks submitted ahead per worker: bounds memory, keeps workers busy
_WATCHDOG_S = 0.5  # how often a worker checks that its parent is still the pack process
_STOP_S = 5.0  # how long a stopped worker may take to exit before it is killed

# glibc gives the heap's free top back to the system whenever more than its trim threshold
# is free there; a fresh interpreter's heap is small, so every image a task allocates and
# frees (Pillow's resize output, a decoded frame) was mapped and faulted in again for the
# next row, which cost the workers 3-19 % of their encoding rate (benchmarks/data_pack.py).
# 16 MiB of padding kept at the top ends that (other C libraries ignore the variable; a
# value the user exported wins). The workers run no linear algebra, but importing numpy
# started OpenBLAS's threads, one per core, in every worker: one thread each cut the
# start of 8 workers on 16 cores from 0.60 to 0.41 s (benchmarks/data_pack.py).
_ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
_WORKER_ENV = {"MALLOC_TOP_PAD_": str(16 << 20), **_ONE_THREAD}
# A worker's command: the pack process's import path, then the worker loop on socket FD.
_BOOT = "import sys; sys.path[:] = {path!r}; from scramjet.data._pool import serve; serve({fd})"


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

    From a worker process, its cause is a :class:`RemoteTraceback`.
    """

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(index, detail)
        self.index = index
        self.detail = detail


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process, as text."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f"\n\n(in the worker process)\n{self.text}"


def run_chunk(fn: Callable[[Any], Any], chunk: list[Any]) -> list[Any]:
    """Run ``fn`` on every task of a chunk; an exception names its task (its CSV row)."""
    out = []
    for task in chunk:
        try:
            out.append(fn(task))
        except Exception as exc:
            raise TaskFailed(task[0], f"{type(exc).__name__}: {exc}") from exc
    return out


def results(fn: Callable[[Any], Any], tasks: list[Any], workers: int, pool: str) -> Generator[Any]:
    """Run ``fn`` on every task (``task[0]`` is its index) and yield the results in order.

    With more than one worker, chunks of tasks go to a thread pool or to worker
    processes, at most ``_CHUNKS_PER_WORKER`` per worker ahead of the chunk being read, so
    memory stays bounded however long the list. A task that raises raises
    :class:`TaskFailed`. A worker process that dies (killed by the OOM killer, a crashing
    decoder) or cannot start raises :class:`WorkerDied` naming the tasks still in flight
    and how it ended, instead of waiting forever for its results.
    """
    if workers <= 1 or len(tasks) < 2:
        for task in tasks:
            yield from run_chunk(fn, [task])
        return
    # Small chunks keep every worker busy to the end of a pack: a thread takes a row or
    # two at a time, a worker process four (one message each way per chunk and per row).
    size = max(1, min(4 if pool == "processes" else 2, len(tasks) // (workers * 8)))
    chunks = (tasks[i : i + size] for i in range(0, len(tasks), size))
    workers = min(workers, -(-len(tasks) // size))  # no worker without a chunk to take
    if pool == "threads":
        yield from _thread_results(fn, chunks, workers)
    else:
        yield from _process_results(fn, chunks, workers)


def _thread_results(
    fn: Callable[[Any], Any], chunks: Iterator[list[Any]], workers: int
) -> Generator[Any]:
    executor = ThreadPoolExecutor(workers, thread_name_prefix="scramjet-pack")
    pending: deque[Future[list[Any]]] = deque()

    def submit(count: int) -> None:
        for chunk in itertools.islice(chunks, count):
            pending.append(executor.submit(run_chunk, fn, chunk))

    try:
        submit(workers * _CHUNKS_PER_WORKER)
        while pending:
            done = pending[0].result()
            pending.popleft()
            submit(1)
            yield from done
    finally:
        # Threads cannot be killed: each finishes the chunk it holds (at most 2 rows).
        executor.shutdown(wait=True, cancel_futures=True)


# ----- worker processes -------------------------------------------------------------------
def serve(fd: int) -> None:
    """A worker process's main loop: run the chunks received on socket ``fd``.

    A reader thread takes messages off the socket as they come (so the pack process can
    always send) and ends the process when the pack process is gone. Each task's outcome
    goes back as its own message: ``("ok", result)`` or ``("failed", index, detail,
    traceback)``.
    A message that cannot be unpickled (the task function's module is missing) is raised
    here: its traceback goes to stderr and the worker exits with code 1.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the pack process's to handle
    conn = Connection(fd)
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(
        target=_read_inbox, args=(conn, os.getppid(), inbox), name="scramjet-pack-inbox",
        daemon=True,
    ).start()  # fmt: skip
    while True:
        msg = inbox.get()
        if isinstance(msg, BaseException):
            raise msg
        fn, chunk = msg
        for task in chunk:
            try:
                out: tuple[Any, ...] = ("ok", fn(task))
            except Exception as exc:
                detail = f"{type(exc).__name__}: {exc}"
                out = ("failed", task[0], detail, traceback.format_exc())
            try:
                conn.send(out)
            except OSError:  # the pack process is gone
                os._exit(0)


def _read_inbox(conn: Connection, parent: int, inbox: queue.SimpleQueue[Any]) -> None:
    """Worker thread: queue every message; end the process once the pack process is gone."""
    try:
        while True:
            if conn.poll(_WATCHDOG_S):
                inbox.put(conn.recv())
            elif os.getppid() != parent:
                break
    except (EOFError, OSError):
        pass
    except Exception as exc:  # a message that cannot be unpickled: raise it in serve()
        inbox.put(exc)
        return
    os._exit(0)  # nobody waits for this worker's results any more


@dataclass
class _Chunk:
    tasks: list[Any]
    out: list[tuple[Any, ...]] = field(default_factory=list)  # messages received so far
    read: int = 0  # messages already yielded (or raised)


@dataclass
class _Worker:
    proc: subprocess.Popen[bytes]
    conn: Connection
    queue: deque[_Chunk] = field(default_factory=deque)  # sent, not all answered, in order


def _start_worker() -> _Worker:
    parent_end, child_end = socket.socketpair()
    try:
        boot = _BOOT.format(path=[p for p in sys.path if isinstance(p, str)], fd=child_end.fileno())
        proc = subprocess.Popen(
            [sys.executable, "-c", boot],
            stdin=subprocess.DEVNULL,
            pass_fds=[child_end.fileno()],
            env={**_WORKER_ENV, **os.environ},
        )
    except BaseException:
        parent_end.close()
        raise
    finally:
        child_end.close()
    return _Worker(proc, Connection(parent_end.detach()))


def _process_results(
    fn: Callable[[Any], Any], chunks: Iterator[list[Any]], workers: int
) -> Generator[Any]:
    """Ordered results of ``fn`` over ``chunks`` from ``workers`` worker processes."""
    started: list[_Worker] = []
    order: deque[_Chunk] = deque()  # sent and not yet all yielded, in task order
    try:
        for _ in range(workers):
            try:
                started.append(_start_worker())
            except OSError as exc:  # no interpreter to run (an embedded or frozen Python)
                how = f"a worker could not start: {sys.executable!r} -c ... raised {exc!r}"
                raise WorkerDied([], [(how, None)]) from exc
        _submit(fn, chunks, started, order)
        while order:
            head = order[0]
            while head.read < len(head.tasks):
                while head.read == len(head.out):
                    _receive(started, order)
                msg = head.out[head.read]
                head.read += 1
                if msg[0] == "failed":
                    raise TaskFailed(msg[1], msg[2]) from RemoteTraceback(msg[3])
                yield msg[1]
            order.popleft()
            _submit(fn, chunks, started, order)
    except BaseException:
        _stop(started, kill=True)
        raise
    _stop(started, kill=False)


def _submit(
    fn: Callable[[Any], Any],
    chunks: Iterator[list[Any]],
    started: list[_Worker],
    order: deque[_Chunk],
) -> None:
    """Send chunks, each to the worker with the fewest waiting, up to the in-flight bound."""
    while len(order) < len(started) * _CHUNKS_PER_WORKER:
        tasks = next(chunks, None)
        if tasks is None:
            return
        worker = min(started, key=lambda w: len(w.queue))
        chunk = _Chunk(tasks)
        try:
            worker.conn.send((fn, tasks))
        except OSError:
            _died(worker, started, order)
        worker.queue.append(chunk)
        order.append(chunk)


def _receive(started: list[_Worker], order: deque[_Chunk]) -> None:
    """Wait for messages; file each under the oldest chunk its worker still owes."""
    by_conn = {w.conn: w for w in started}
    for conn in wait(list(by_conn)):
        worker = by_conn[conn]  # type: ignore[index]
        try:
            msg = worker.conn.recv()
        except (EOFError, OSError):
            _died(worker, started, order)
        _file(worker, msg)


def _file(worker: _Worker, msg: Any) -> None:
    """File a worker's answer under the oldest chunk it still owes."""
    first = worker.queue[0]
    first.out.append(msg)
    if len(first.out) == len(first.tasks):
        worker.queue.popleft()


def _died(worker: _Worker, started: list[_Worker], order: deque[_Chunk]) -> NoReturn:
    """Raise :class:`WorkerDied` for a worker whose socket broke: how it (and any other
    worker that already failed) ended, the task it was on, every task still in flight."""
    try:
        worker.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # the socket broke but the process lives on: end it
        worker.proc.kill()
        worker.proc.wait()
    for w in started:  # answers sent before a worker died (a failed send finds them unread)
        if w.proc.poll() is not None:
            with contextlib.suppress(EOFError, OSError):
                while w.queue and w.conn.poll(0):
                    _file(w, w.conn.recv())
    ends = []
    for w in [worker, *(w for w in started if w is not worker)]:
        code = w.proc.poll()
        if code is None or (code == 0 and w is not worker):
            continue
        on = w.queue[0].tasks[len(w.queue[0].out)][0] if w.queue else None
        ends.append((_how_it_ended(code), on))
    lost = [task[0] for chunk in order for task in chunk.tasks[len(chunk.out) :]]
    raise WorkerDied(lost, ends)


def _how_it_ended(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"a worker was killed by {name}{_SIGNAL_CAUSES.get(name, '')}"
    if code == 0:
        return "a worker exited with code 0 before it answered every task"
    return (
        f"a worker exited with code {code} (a Python error in the worker process: its "
        "traceback is printed above, on stderr)"
    )


def _stop(started: list[_Worker], kill: bool) -> None:
    """End the workers: closing a worker's socket ends it; ``kill`` terminates them first."""
    for w in started:
        if kill and w.proc.poll() is None:
            w.proc.terminate()
        w.conn.close()
    for w in started:
        try:
            w.proc.wait(timeout=_STOP_S)
        except subprocess.TimeoutExpired:
            w.proc.kill()
            w.proc.wait()


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
