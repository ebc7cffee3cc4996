"""One display thread for the terminal callbacks: ``rich.live`` on a terminal, plain lines elsewhere.

:class:`LiveOrPlain` is what :class:`~scramjet.callbacks.ProgressBarCallback` and
:class:`~scramjet.dashboard.Dashboard` draw with. The training loop never draws: on a
terminal rich's own timer thread re-renders the renderable ``refresh_per_second``
times a second; elsewhere (CI logs, files, dumb terminals) a daemon thread calls
``tick`` every ``interval`` seconds to print plain text.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

__all__ = ["LiveOrPlain"]


class LiveOrPlain:
    """Draws ``renderable`` with ``rich.live`` on a terminal, or calls ``tick`` on a timer.

    The choice is made once, from a rich ``Console`` on ``file``: live drawing when it is
    a terminal (rich's detection, which honours ``TTY_COMPATIBLE``) that is not a dumb one
    (``TERM=dumb``), plain otherwise. ``FORCE_COLOR`` alone on a stream that is not a
    terminal (a CI log) gives plain lines: it asks for colours, not for redraws.

    Args:
        renderable: What ``rich.live.Live`` draws; read again on every refresh.
        tick: Prints the plain lines; called from the display thread every ``interval``
            seconds in plain mode (never in live mode).
        file: Stream to draw on (default: standard output).
        force_terminal: Override the terminal detection (True: always draw live).
        refresh_per_second: Redraw rate in live mode.
        interval: Seconds between ``tick`` calls in plain mode.
        name: Name of the plain-mode thread (shows in ``threading.enumerate()``).

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> display = LiveOrPlain("working", lambda: print("tick", file=out), file=out)
        >>> display.live
        False
        >>> display.start(); display.running
        True
        >>> display.stop(); display.running
        False
    """

    def __init__(
        self,
        renderable: Any,
        tick: Callable[[], None],
        *,
        file: IO[str] | None = None,
        force_terminal: bool | None = None,
        refresh_per_second: float = 4.0,
        interval: float = 10.0,
        name: str = "scramjet-display",
    ) -> None:
        from rich.console import Console

        self._console = Console(file=file, force_terminal=_terminal_choice(file, force_terminal))
        #: True: drawn with ``rich.live``; False: plain lines from ``tick``. A terminal
        #: that cannot redraw in place (``TERM=dumb``, ``TTY_INTERACTIVE=0`` as CI logs set
        #: it) gets plain lines: rich's live view would print nothing until the run ends.
        self.live = self._console.is_interactive
        self._renderable = renderable
        self._tick = tick
        self._refresh_per_second = refresh_per_second
        self._interval = interval
        self._name = name
        self._rich_live: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def running(self) -> bool:
        """Whether the display is started and not yet stopped."""
        return self._rich_live is not None or self._thread is not None

    def start(self) -> None:
        """Start drawing (live) or the plain-mode thread. No-op while already running."""
        if self.running:
            return
        if self.live:
            from rich.live import Live

            self._rich_live = Live(
                self._renderable,
                console=self._console,
                refresh_per_second=self._refresh_per_second,
                transient=False,
            )
            self._rich_live.start()
        else:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, daemon=True, name=self._name)
            self._thread.start()

    def redraw(self) -> None:
        """Draw one frame now, as the display thread does on its timer: a full refresh of
        the live view, or one ``tick`` in plain mode. Starts nothing."""
        if self._rich_live is not None:
            self._rich_live.refresh()
        elif not self.live:
            self._tick()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._tick()

    def stop(self) -> None:
        """Stop and join the display thread (live mode draws a last frame). Safe to repeat.

        Called on a normal end as well as from a callback's ``close()`` after a crash, so
        nothing keeps drawing once a run is over.
        """
        live, self._rich_live = self._rich_live, None
        if live is not None:
            live.stop()
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()


def _terminal_choice(file: Any, force_terminal: bool | None) -> bool | None:
    """``force_terminal`` for the display: ``False`` where only ``FORCE_COLOR`` makes
    ``file`` look like a terminal, else as given (``None``: rich's detection).

    ``FORCE_COLOR`` (set by CI systems for coloured logs) asks for colours; rich takes it
    as a terminal that redraws in place, which writes every frame of the live view into
    the log. Only a stream that is a terminal, ``TTY_COMPATIBLE=1`` or
    ``TTY_INTERACTIVE=1`` (rich's names for a device that redraws) get the live view.

    Example:
        >>> import io
        >>> _terminal_choice(io.StringIO(), True)
        True
    """
    if force_terminal is not None or not os.environ.get("FORCE_COLOR"):
        return force_terminal
    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("TTY_INTERACTIVE") == "1":
        return None
    isatty = getattr(file if file is not None else sys.stdout, "isatty", None)
    try:
        return None if callable(isatty) and isatty() else False
    except ValueError:  # a closed stream
        return False
