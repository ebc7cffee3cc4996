"""Stopping cleanly when the machine is taken away (preemption).

Schedulers (Slurm, Kubernetes, spot instances) and torch's elastic agent announce the
end of a process with ``SIGTERM`` and kill it a grace period later. A
:class:`PreemptionWatcher` turns that signal into a flag: the handler only records
it; the training loop reads it at the next optimizer step, saves a checkpoint and
raises :class:`TrainingPreempted`, which ends the process with status
:data:`PREEMPTED_EXIT_CODE` (143, the status a shell reports for a process ended by
``SIGTERM``).

In a run of several processes the signal may reach the ranks at different steps (or
only one of them), while the checkpoint needs every rank at the same step. So when a
process group exists, :meth:`PreemptionWatcher.agreed` all-reduces the flag (one small
tensor, maximum) in the background at agreed steps, about once a second, and every rank
reads the result at the step after: all ranks stop at the same step, within about two
seconds of the signal (two steps, when steps are longer), and the loop seldom waits for
the network. Rank 0 sizes each gap between checks from the steps before it, and a gap
holds at most four times the steps of the one before (the first holds two): fast first
steps (batches the DataLoader had ready) do not put the next check minutes away when the
later steps are slow. In one process it reads a Python attribute at every step.

Handlers are installed only by :meth:`PreemptionWatcher.install` (from the main thread,
at the start of training) and the previous ones are put back by
:meth:`PreemptionWatcher.restore`; importing this module installs nothing.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from scramjet.runtime import distributed as dist
from scramjet.runtime._step_vote import StepVote

__all__ = [
    "PREEMPTED_EXIT_CODE",
    "PreemptionWatcher",
    "TrainingPreempted",
    "shield_loader_worker",
    "shielded_worker_init",
    "worker_init_while_watched",
]

PREEMPTED_EXIT_CODE = 143
"""Exit status of a process that stopped on a preemption signal after saving (128 + 15)."""

_Handler = Callable[[int, FrameType | None], Any] | int | None

# The signals a watcher of this process handles now; a DataLoader worker forked while
# training runs inherits this set and keeps them away (see shield_loader_worker).
_WATCHED: set[int] = set()
# The watchers whose handlers are installed, oldest first (two checkpoint callbacks of one
# Trainer each install theirs, and end in the same order they started).
_INSTALLED: list[PreemptionWatcher] = []


class TrainingPreempted(SystemExit):
    """``train()`` stopped on a preemption signal after saving a checkpoint.

    A ``SystemExit``: left uncaught, the process ends with status
    :data:`PREEMPTED_EXIT_CODE` (143) without a traceback, and the next run with
    ``resume_from="auto"`` continues from the saved step.

    Attributes:
        signal_name: The signal that asked to stop (``"SIGTERM"``).
        step: The optimizer step the checkpoint holds.
        checkpoint: Where the checkpoint was written (the main process knows it; other
            ranks hold None).
    """

    def __init__(self, signal_name: str, step: int, checkpoint: str | None) -> None:
        super().__init__(PREEMPTED_EXIT_CODE)
        self.signal_name = signal_name
        self.step = step
        self.checkpoint = checkpoint

    def __str__(self) -> str:
        where = f" to {self.checkpoint}" if self.checkpoint else ""
        return (
            f"training stopped on {self.signal_name} at optimizer step {self.step}; the "
            f"training state was saved{where}. Run the same command again with "
            f"resume_from='auto' to continue (exit status {PREEMPTED_EXIT_CODE})."
        )


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _catchable(sig: Any) -> signal.Signals:
    """``sig`` as a signal a handler can be installed for (TypeError / ValueError if not,
    raised before any handler is replaced)."""
    if isinstance(sig, bool) or not isinstance(sig, int):
        raise TypeError(f"signals must be signal numbers such as signal.SIGTERM; received {sig!r}.")
    if sig not in signal.valid_signals():
        raise ValueError(
            f"{sig} is not a signal number on this system; pass signals such as "
            f"signal.SIGTERM or signal.SIGUSR1."
        )
    resolved = signal.Signals(sig)
    if resolved in (signal.SIGKILL, signal.SIGSTOP):
        raise ValueError(
            f"{resolved.name} cannot be caught (the kernel ends or stops the process without "
            f"running any handler), so it cannot ask training to save; leave it out and "
            f"watch the notice your scheduler sends before it, e.g. signal.SIGTERM or "
            f"signal.SIGUSR1."
        )
    return resolved


class PreemptionWatcher:
    """Records preemption signals and lets every rank agree on when to stop.

    Args:
        signals: The signals that mean "save and stop" (default ``SIGTERM``; add
            ``signal.SIGUSR1`` for Slurm's ``--signal=USR1@120``).
        check_interval_s: With several processes, about how often (in seconds) the
            ranks compare flags; 0 checks at every step.

    Example:
        >>> watcher = PreemptionWatcher()
        >>> watcher.install()          # from the main thread, when training starts
        True
        >>> watcher.agreed(step=1)     # at each optimizer step: no signal yet
        False
        >>> watcher.restore()          # when training ends: the previous handler is back
    """

    def __init__(
        self, signals: Sequence[int] = (signal.SIGTERM,), *, check_interval_s: float = 1.0
    ) -> None:
        if not isinstance(check_interval_s, int | float) or check_interval_s < 0:
            raise ValueError(
                f"check_interval_s must be a number of seconds >= 0; received {check_interval_s!r}."
            )
        self.check_interval_s = float(check_interval_s)
        self.signals = tuple(_catchable(sig) for sig in signals)
        self._previous: dict[signal.Signals, _Handler] = {}
        self._seen: int | None = None
        self._vote = StepVote(1, self.check_interval_s)

    @property
    def installed(self) -> bool:
        """Whether the handlers are in place."""
        return bool(self._previous)

    @property
    def seen(self) -> str | None:
        """Name of the signal this process received, or None."""
        return None if self._seen is None else _signal_name(self._seen)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._seen = signum  # only a flag: the loop acts on it at the next step boundary
        for watcher in _INSTALLED:  # those installed under this one are not called: tell
            if signum in watcher.signals:  # them too (the first checkpoint callback saves)
                watcher._seen = signum

    def install(self) -> bool:
        """Install the handlers (remembering the previous ones).

        Returns:
            False (and nothing installed) outside the main thread, where Python does not
            allow signal handlers; training then ends on the signal as before.
        """
        if self._previous or threading.current_thread() is not threading.main_thread():
            return bool(self._previous)
        self._seen = None
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        _INSTALLED.append(self)
        _WATCHED.update(int(sig) for sig in self.signals)
        return True

    def restore(self) -> None:
        """Put the previous handlers back (a no-op when not installed).

        Watchers may end in another order than they started: a watcher installed over
        this one is handed the handler this one found, and puts it back when it ends, so
        the handler in place before the first of them is always the one left at the end.
        """
        previous, self._previous = self._previous, {}
        if self in _INSTALLED:
            _INSTALLED.remove(self)
        for sig, found in previous.items():
            handler = found if found is not None else signal.SIG_DFL
            if signal.getsignal(sig) == self._handle:
                signal.signal(sig, handler)
                continue
            for later in _INSTALLED:  # installed over this one: it restores what we found
                if later._previous.get(sig) == self._handle:
                    later._previous[sig] = handler
        _WATCHED.clear()
        _WATCHED.update(int(sig) for watcher in _INSTALLED for sig in watcher._previous)

    def agreed(self, step: int) -> bool:
        """Whether any rank received a signal: True on every rank or on none.

        Call it at every optimizer step on every rank, with the step number. In one
        process it reads the flag. With a process group, it checks only at agreed steps,
        about every ``check_interval_s`` seconds (every step when steps are slower): each
        check starts a small all-reduce of the flag, which also carries rank 0's choice of
        the next check step, and every rank reads it at the following step (finished by
        then, as a rule: the loop seldom waits for the network). Every rank stops at the
        same step: the step after the first check that follows the signal.
        """
        if not dist.is_distributed():
            return self._seen is not None
        agreed = self._vote.vote(step, [self._seen or 0])
        if not agreed or not agreed[0]:
            return False
        if self._seen is None:
            self._seen = agreed[0]  # another rank's signal: report it as this rank's reason
        return True

    def finish(self) -> None:
        """Wait for the all-reduce still in flight, if any (every rank, e.g. when stopping)."""
        self._vote.finish()


def shield_loader_worker(worker_id: int | None = None) -> None:
    """A DataLoader ``worker_init_fn``: the worker lives through a preemption signal.

    ``torchrun`` and ``scramjet launch`` send ``SIGTERM`` to each worker's whole process
    group, and Slurm to every process of the job step, so the DataLoader's worker
    processes get the signal too. torch ends a worker on it, and the training process
    then fails with ``DataLoader worker ... is killed by signal: Terminated`` before it
    can save. In a worker set up by this function the preemption signals (``SIGTERM`` and
    those a :class:`PreemptionWatcher` handled when the worker was forked) do nothing,
    except ``SIGTERM`` from the training process itself: that is how the DataLoader ends a
    worker that did not stop in time, and the worker then exits at once. The worker still
    ends when the training process ends, as usual.

    Args:
        worker_id: Given by the DataLoader; not used.

    Example:
        >>> from torch.utils.data import DataLoader
        >>> loader = DataLoader(range(8), num_workers=2, worker_init_fn=shield_loader_worker)
    """
    if threading.current_thread() is not threading.main_thread():
        return  # signal dispositions can only be set from the main thread (not a worker)
    signals = {signal.SIGTERM, *(signal.Signals(sig) for sig in _WATCHED)}
    parent = os.getppid()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if os.getppid() != parent:  # the training process is gone: nothing left to feed
            os._exit(0)

    for sig in signals:
        signal.signal(sig, on_signal)
    # Held back in this thread (and in the threads it starts); one thread takes them with
    # their sender, which the handler above cannot see.
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    threading.Thread(
        target=_take_signals, args=(signals, parent), name="scramjet-worker-signals", daemon=True
    ).start()


def _take_signals(signals: set[signal.Signals], parent: int) -> None:
    while True:
        info = signal.sigwaitinfo(signals)
        if info.si_signo == signal.SIGTERM and info.si_pid == parent:
            os._exit(0)  # the DataLoader ends this worker (as torch's own handler does)
        if os.getppid() != parent:
            os._exit(0)


def _shield_then(init: Callable[[int], Any] | None, worker_id: int) -> None:
    shield_loader_worker(worker_id)
    if init is not None:
        init(worker_id)


def shielded_worker_init(init: Callable[[int], Any] | None = None) -> Callable[[int], None]:
    """``init`` (a ``worker_init_fn``, or None) preceded by :func:`shield_loader_worker`.

    The result can be pickled when ``init`` can (for the ``spawn`` start method).

    Example:
        >>> def seed_numpy(worker_id: int) -> None: ...
        >>> kwargs = {"num_workers": 2, "worker_init_fn": shielded_worker_init(seed_numpy)}
    """
    return functools.partial(_shield_then, init)


def _shield_if_watched(init: Callable[[int], Any] | None, worker_id: int) -> None:
    # A forked worker holds a copy of the training process's objects, garbage not yet
    # collected there included. Were its collector to free a CUDA tensor of that garbage,
    # the worker would abort ("CUDA error: initialization error"); frozen, the collector
    # leaves them be (and does not copy their memory pages by touching them).
    gc.freeze()
    if _WATCHED:  # a watcher ran in the training process when this worker was forked
        shield_loader_worker(worker_id)
    if init is not None:
        init(worker_id)


def worker_init_while_watched(init: Callable[[int], Any] | None = None) -> Callable[[int], None]:
    """``init`` preceded by :func:`shield_loader_worker` in workers forked while a
    :class:`PreemptionWatcher` handles signals (the Trainer's own loaders use it, so a
    preemption signal sent to the whole process group reaches the save), and by
    ``gc.freeze()``: the objects a worker inherits are never collected in it. Workers started
    with ``spawn`` do not see the watcher: shield them with :func:`shielded_worker_init`."""
    if isinstance(init, functools.partial) and init.func in (_shield_then, _shield_if_watched):
        return init  # shielded already
    return functools.partial(_shield_if_watched, init)
