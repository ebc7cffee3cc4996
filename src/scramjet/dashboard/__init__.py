"""A terminal dashboard for training runs, drawn with ``rich.live``.

:class:`Dashboard` is a read-only Trainer callback and a standalone tool with nebulae's
``gauge()`` and ``log()`` calls. It shows progress per stage with throughput and ETA,
the latest metrics, CPU/GPU memory and live line curves, redrawn by a timer thread so
the training loop never waits for the screen. Off a terminal it prints plain lines.

Example:
    >>> import io
    >>> from scramjet.dashboard import Dashboard
    >>> board = Dashboard(file=io.StringIO(), show_memory=False)
    >>> board.gauge({"loss": 1.0}, mile=0, epoch=0, mpe=10, stage="train")
    >>> board.close()
"""

from __future__ import annotations

from scramjet.dashboard._board import Dashboard
from scramjet.dashboard._plot import moving_average, render_curve
from scramjet.dashboard._view import Snapshot, StageView, plain_lines, render

__all__ = [
    "Dashboard",
    "Snapshot",
    "StageView",
    "moving_average",
    "plain_lines",
    "render",
    "render_curve",
]
