"""Run a Python function in N processes on this machine (for scripts and notebooks).

Built on torch's elastic launcher, the engine behind ``torchrun``: each process gets
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` in its
environment, so :func:`scramjet.runtime.init_distributed` creates the process group.
The rendezvous listens on a free port picked by the operating system, so two runs on
one machine never collide on a hard-coded port.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, NoReturn

__all__ = ["LaunchError", "launch"]


class LaunchError(RuntimeError):
    """A process of a :func:`launch` run failed; the whole run was stopped.

    Attributes:
        rank: Global rank of the first process that failed.
        message: Its error (``"ValueError: ..."``, or the signal that ended it).
        traceback: Its Python traceback when it raised, else an empty string.
        failures: ``{rank: message}`` of every process that failed.
    """

    def __init__(self, rank: int, message: str, traceback: str, failures: dict[int, str]) -> None:
        self.rank = rank
        self.message = message
        self.traceback = traceback
        self.failures = failures
        text = f"rank {rank} failed: {message}"
        hint = _collective_hint(rank, message, failures)
        if hint:
            text += f"\n{hint}"
        if traceback:
            text += f"\n--- traceback of rank {rank} ---\n{traceback.rstrip()}"
        super().__init__(text)


# What torch's backends say when a collective gave up waiting, or lost a peer.
_TIMEOUT_SIGNS = ("timed out waiting", "collective operation timeout", "before timing out")
_LOST_PEER_SIGNS = ("connection closed by peer", "connection reset by peer", "broken pipe")


def _collective_hint(rank: int, message: str, failures: dict[int, str]) -> str:
    """A line that says what a collective's failure means: the rank that reports it is
    usually the one that waited, not the one at fault."""
    lowered = message.lower()
    others = sorted(r for r in failures if r != rank)
    also = "".join(f"; rank {r}: {_as_other(failures[r])}" for r in others)
    also = f" ({also[2:]})" if also else ""
    if any(sign in lowered for sign in _TIMEOUT_SIGNS):
        from scramjet.runtime.distributed import DEFAULT_TIMEOUT_S, TIMEOUT_ENV

        setting = os.environ.get(TIMEOUT_ENV)
        now = f"{setting} s here" if setting else f"{DEFAULT_TIMEOUT_S:g} s by default"
        return (
            f"rank {rank} gave up waiting for the other ranks in a collective{also}: another "
            f"rank was stuck or much slower, or did not call the same collective (a rank that "
            f"stopped training early, or work done on rank 0 alone). The wait is the process "
            f"group's timeout, {TIMEOUT_ENV} ({now}): raise it if a rank needs longer on "
            f"purpose, otherwise look for the rank that did not arrive."
        )
    if any(sign in lowered for sign in _LOST_PEER_SIGNS):
        return (
            f"rank {rank} lost its connection to another rank{also}: that rank ended first, "
            f"either by an error of its own or by leaving training before the others (a "
            f"stop decided on one rank only); its output above shows which."
        )
    return ""


def _as_other(message: str) -> str:
    """Another rank's failure as the hint shows it: SIGTERM is what the launcher sends the
    ranks still running once one failed (often the stuck one)."""
    if message == "killed by SIGTERM":
        return "still running, stopped by the launcher (SIGTERM)"
    return message


def _fresh_store_per_round() -> None:
    """Give every round of the worker group its own rendezvous store.

    By default torch elastic's workers reuse the agent's store across restarts, so the
    restarted group can read the addresses of the processes that died (under gloo: a
    ``connectFullMesh ... Connection refused`` on restart). With the sharing off, rank 0
    of each round hosts a new store on a free port. A value set by the user is kept.
    """
    os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")


def _run_rank(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    # Runs in each child process. Destroying the group here spares users the
    # "process group was not destroyed" warning when fn forgot to.
    from scramjet.runtime.distributed import destroy_distributed
    from scramjet.runtime.preemption import TrainingPreempted

    try:
        result = fn(*args)
        destroy_distributed()
        _check_sendable(fn, result)
    except SystemExit as exit:
        if exit.code in (0, None) or isinstance(exit, TrainingPreempted):
            raise
        # Recorded as this rank's error: a bare exit status left no message, and the exit
        # handler then closed the group, so a rank waiting on it failed first and was named.
        _exit_recorded(
            RuntimeError(f"{getattr(fn, '__qualname__', fn)!s} called sys.exit({exit.code!r})")
        )
    except Exception as error:
        _exit_recorded(error)
    return result


def _exit_recorded(error: Exception) -> NoReturn:
    """End this rank with ``error`` written where the launcher reads it (the elastic error
    file), as torch's ``record`` would, then exit with status 1.

    Raised instead, the error also went through torch.multiprocessing's own handler, which
    pickles its traceback into a ``pytorch-errorfile-*.pickle`` in the temp folder that
    nothing removes: one file per failed rank, per failed launch.
    """
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    ErrorHandler().record_exception(error)
    raise SystemExit(1)


def _check_sendable(fn: Callable[..., Any], result: Any) -> None:
    """Raise, as this rank's error, when ``result`` cannot be pickled back to the caller
    (torch's queue would fail after ``fn`` returned, leaving only "exited with status 1")."""
    from multiprocessing.reduction import ForkingPickler

    try:
        ForkingPickler.dumps(result)
    except Exception as error:
        raise TypeError(
            f"{getattr(fn, '__qualname__', fn)!s} returned a {type(result).__name__} that "
            f"cannot be sent back to the caller ({type(error).__name__}: {error}); each "
            f"process's result travels by pickle. Return picklable values (numbers, "
            f"strings, tensors, dicts and lists of them), or save other results to a file."
        ) from None


def launch(
    fn: Callable[..., Any],
    nprocs: int = 2,
    args: Sequence[Any] = (),
    *,
    start_method: Literal["spawn", "fork", "forkserver"] = "spawn",
    max_restarts: int = 0,
    monitor_interval: float = 0.1,
) -> Any:
    """Run ``fn(*args)`` in ``nprocs`` processes and return rank 0's result.

    Call :func:`scramjet.runtime.init_distributed` inside ``fn`` to create the process
    group (gloo on CPU, NCCL on CUDA). If any process raises or dies, the others are
    stopped and :class:`LaunchError` names the rank and its error.

    Args:
        fn: A module-level function (it is pickled by reference with ``spawn``; in a
            notebook, define it in a module or use ``start_method="fork"`` on Linux).
        nprocs: Number of processes (>= 1).
        args: Positional arguments for ``fn``; must be picklable.
        start_method: How children start: ``"spawn"`` (safe everywhere), ``"fork"``
            (lets notebook-defined functions run; Linux/macOS only, no CUDA in the parent).
        max_restarts: How many times the elastic agent restarts the group after a failure.
        monitor_interval: Seconds between health checks of the children.

    Returns:
        What ``fn`` returned on rank 0 (every rank's result must be picklable).

    Raises:
        ValueError: ``nprocs`` < 1.
        LaunchError: A process failed (after ``max_restarts`` restarts).

    Example:
        >>> from scramjet.runtime import launch  # doctest: +SKIP
        >>> launch(train, nprocs=2, args=(config,))  # doctest: +SKIP
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be an int >= 1, got {nprocs!r}")
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    log_dir = tempfile.mkdtemp(prefix="scramjet-launch-")
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nprocs,
        run_id=uuid.uuid4().hex,
        rdzv_backend="c10d",
        # Port 0: the OS picks a free port for the rendezvous store (as torchrun --standalone).
        rdzv_endpoint="localhost:0",
        max_restarts=max_restarts,
        monitor_interval=monitor_interval,
        start_method=start_method,
        # The processes' error files go in a folder of this launch, removed when it ends
        # (torch's default is a new ``torchelastic_*`` temp folder per launch, never removed).
        logs_specs=DefaultLogsSpecs(log_dir=log_dir),
    )
    if max_restarts:
        _fresh_store_per_round()  # a restarted group must not read the dead processes' keys
    try:
        with _signal_handlers_kept():
            results = elastic_launch(config, _run_rank)(fn, tuple(args))
    except ChildFailedError as error:
        raise _launch_error(error) from None
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    return results[0]


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """Put back the handlers of the signals torch's elastic agent takes over.

    While the processes run, the agent's handler stops them on Ctrl-C or SIGTERM; it is
    left installed when the agent returns, so a later Ctrl-C in the calling script or
    notebook would raise torch's ``SignalException`` instead of ``KeyboardInterrupt``, and
    a handler the caller had set (a preemption watcher's) would be gone.
    """
    kept: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():  # where the agent sets them
        names = os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT")
        for name in names.split(","):
            sig = getattr(signal, name.strip(), None)
            if isinstance(sig, signal.Signals):
                kept[sig] = signal.getsignal(sig)
    try:
        yield
    finally:
        for sig, handler in kept.items():
            if handler is not None:  # None: set outside Python, left alone
                signal.signal(sig, handler)


def _launch_error(error: Any) -> LaunchError:
    found = {**_recorded_elsewhere(error.failures), **error.failures}
    failures: dict[int, str] = {}
    tracebacks: dict[int, str] = {}
    for rank, failure in sorted(found.items()):
        failures[rank], tracebacks[rank] = _describe_failure(failure)
    rank = min(found, key=lambda r: _failed_at(found[r]))
    return LaunchError(
        rank, failures.get(rank, "unknown error"), tracebacks.get(rank, ""), failures
    )


def _recorded_elsewhere(failures: dict[int, Any]) -> dict[int, Any]:
    """The errors other ranks recorded (``<attempt>/<local rank>/error.json``) that the
    agent's report left out: it reports the first process it sees end, and stops the
    others. A rank whose error closed the group ends later than the rank that then lost its
    connection, so without these the rank at fault went unnamed.

    The folders are numbered by local rank; a node's global ranks are its first global
    rank plus the local rank (read from a reported failure: its key minus its local rank),
    so on the second node of a two-node run, folder ``1`` is global rank 3 of 4.
    """
    import json
    from pathlib import Path
    from types import SimpleNamespace

    recorded: dict[int, Any] = {}
    for global_rank, failure in failures.items():
        try:
            attempt = Path(failure.error_file).parent.parent
            files = list(attempt.glob("*/error.json"))
            first = global_rank - int(failure.local_rank)
        except (AttributeError, OSError, TypeError, ValueError):
            continue
        for file in files:
            if not file.parent.name.isdigit():
                continue
            rank = first + int(file.parent.name)
            if rank in failures or rank in recorded:
                continue
            try:
                data = json.loads(file.read_text())
            except (OSError, ValueError):
                continue
            recorded[rank] = SimpleNamespace(
                message=None,
                local_rank=int(file.parent.name),
                error_file_data=data,
                error_file=str(file),
                exitcode=None,
                timestamp=math.inf,
            )
    return recorded


def _failed_at(failure: Any) -> tuple[bool, float]:
    """When a process failed, to order the failures: its error file's modification time
    (torch's own timestamp is in whole seconds, so a rank failing on a peer's exit in the
    same second tied with it and the lower rank was named), else torch's timestamp.

    A process ended by SIGTERM without an error record comes after every other: that is
    how the launcher stops the ranks still running once one failed, and its whole-second
    stamp, earlier than the failed rank's exact time within that second, named it (a
    stuck rank, not the rank that reported the timeout).
    """
    stopped = getattr(failure, "exitcode", None) == -signal.SIGTERM
    try:
        return stopped, os.stat(failure.error_file).st_mtime
    except (OSError, TypeError, ValueError):
        return stopped, float(failure.timestamp)


def _describe_failure(failure: Any) -> tuple[str, str]:
    """``(message, traceback)`` of one failed process, from its elastic error record."""
    # The record is {"message": "ValueError: ...", "extraInfo": {"py_callstack": ...}};
    # depending on the torch version it is the failure's message or inside its file data.
    record: Any = failure.message
    if not isinstance(record, dict):
        data = failure.error_file_data
        record = data.get("message") if isinstance(data, dict) else None
    if isinstance(record, dict):
        extra = record.get("extraInfo")
        callstack = extra.get("py_callstack", "") if isinstance(extra, dict) else ""
        return str(record.get("message", record)), str(callstack)
    code = getattr(failure, "exitcode", None)  # no Python exception: the exit status says it
    if isinstance(code, int) and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}", ""
        except ValueError:
            return f"killed by signal {-code}", ""
    if isinstance(code, int):
        return f"exited with status {code}", ""
    return str(failure.message), ""
