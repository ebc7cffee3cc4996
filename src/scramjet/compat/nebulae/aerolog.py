"""nebulae's Aerolog name ``DashBoard`` over :class:`scramjet.dashboard.Dashboard`."""

from __future__ import annotations

from scramjet.dashboard import Dashboard

__all__ = ["DashBoard"]


class DashBoard(Dashboard):
    """nebulae's ``DashBoard``: :class:`scramjet.dashboard.Dashboard` under its old name.

    Same arguments, ``gauge(entry, mile, epoch, mpe, stage, interval=1, duration=None)``
    and ``log(gauge=True, tachograph=True, record=None)``. Differences from nebulae: the
    screen refreshes on a timer (never per step), plots are PNG (not JPG), off a
    terminal it prints plain lines, and only rank 0 draws or writes.

    Example:
        >>> import io
        >>> db = DashBoard(log_path="./aerolog", window=5, divisor=10, span=30,
        ...                file=io.StringIO())
        >>> db.gauge({"loss": 0.7}, mile=0, epoch=0, mpe=100, stage="train")
        >>> db.close()
    """
