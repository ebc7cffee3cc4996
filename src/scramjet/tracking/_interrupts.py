"""A Ctrl-C that Python swallowed still stops the run.

Python runs a signal handler in the main thread, between two bytecodes of whatever code
runs there. When that code is a finalizer (a ``__del__`` method, a ``weakref`` callback or
a ``weakref.finalize``, which the garbage collector runs in the thread that frees the
object), the ``KeyboardInterrupt`` raised by the handler cannot propagate: Python prints
"Exception ignored in ..." and carries on, and the Ctrl-C is lost. During a run's final
upload to an object store that does not answer, the abandoned network calls leave many
such objects to free, and a Ctrl-C lands in one of them often enough to matter.

Inside :func:`keep_ctrl_c` such a lost ``KeyboardInterrupt`` is noted (it reaches
``sys.unraisablehook``), and :func:`raise_lost_ctrl_c` raises it again: the Trainer calls it
before every batch, the run storage around each remote call and the Experiment between the
steps of a run's end.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any


class _Keeper:
    """``sys.unraisablehook`` while a run is going: notes a ``KeyboardInterrupt`` that a
    finalizer in the main thread swallowed, then lets the previous hook print it."""

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous
        self.lost = False
        self.active = True

    def __call__(self, unraisable: Any) -> None:
        if (
            self.active
            and isinstance(unraisable.exc_value, KeyboardInterrupt)
            and threading.current_thread() is threading.main_thread()
        ):
            self.lost = True
        self.previous(unraisable)


_current: _Keeper | None = None


@contextlib.contextmanager
def keep_ctrl_c() -> Iterator[None]:
    """While inside, a ``KeyboardInterrupt`` swallowed by a finalizer in the main thread is
    kept for :func:`raise_lost_ctrl_c`. Nested uses share the outermost one; outside the
    main thread (where no signal handler runs) this does nothing.

    Example:
        >>> with keep_ctrl_c():
        ...     raise_lost_ctrl_c()  # no Ctrl-C was lost: nothing happens
    """
    global _current
    if _current is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    keeper = _current = _Keeper(sys.unraisablehook)
    sys.unraisablehook = keeper
    try:
        yield
    finally:
        _current, keeper.active = None, False
        if sys.unraisablehook is keeper:
            sys.unraisablehook = keeper.previous
        # else: a hook set since wraps this one; it stays in that chain, now only passing on


def raise_lost_ctrl_c() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C was swallowed by a finalizer since the last
    call (inside :func:`keep_ctrl_c`, in the main thread); otherwise do nothing."""
    keeper = _current
    if keeper is not None and keeper.lost and threading.current_thread() is threading.main_thread():
        keeper.lost = False
        raise KeyboardInterrupt(
            "Ctrl-C (it arrived while Python ran a finalizer, which cannot raise it; "
            "raised here instead)"
        )


__all__ = ["keep_ctrl_c", "raise_lost_ctrl_c"]
