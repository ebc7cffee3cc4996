"""How far a run got and how long it ran, read from its folder, a crashed run included.

A run killed outright (``kill -9``, the out-of-memory killer) never writes its end into
``run.json``: no ``ended``, no ``duration``, no ``last_step``. Its metric rows and the
times its files were last written still say how far it got, so the listing and the
report take those, and label the duration as the time up to the last write.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scramjet.tracking._files import last_written
from scramjet.tracking.loggers.base import MetricRow

#: How the duration of a run that did not end is labelled: the time its processes ran
#: up to their last write (a metric row or ``run.json``), not the time to an end.
CRASHED_NOTE = "crashed; to its last write"


@dataclass(frozen=True)
class Progress:
    """``last_step``: optimizer updates done; ``duration_s``: seconds the run's processes
    ran; ``note``: None for a duration the run recorded at its end, else how it was
    estimated (:data:`CRASHED_NOTE`); ``last_write``: the time of that last write."""

    last_step: int | None
    duration_s: float | None
    note: str | None = None
    last_write: float | None = None

    def duration_text(self, format_seconds: Any) -> str:
        """The duration as ``format_seconds`` writes it, with its note; ``""`` if unknown."""
        if self.duration_s is None:
            return ""
        text = str(format_seconds(self.duration_s))
        return f"{text} ({self.note})" if self.note else text


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def recorded_duration(info: Mapping[str, Any]) -> float | None:
    """The run's ``duration`` in ``run.json``, else ``finished`` (or ``ended``) minus
    ``started``; None while unknown."""
    recorded = _number(info.get("duration"))
    if recorded is not None and recorded >= 0:
        return recorded
    start, end = _number(info.get("started")), _number(info.get("finished", info.get("ended")))
    if start is None or end is None or end < start:
        return None
    return end - start


def _ended(info: Mapping[str, Any]) -> bool:
    return _number(info.get("ended", info.get("finished"))) is not None


def _last_step(info: Mapping[str, Any], rows: Sequence[MetricRow]) -> int | None:
    """The step ``run.json`` recorded at the run's end; for a run that did not end (or an
    older folder without it), the step of its last metric row."""
    recorded = info.get("last_step")
    recorded = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else None
    if recorded is not None and _ended(info):
        return recorded
    # A session that did not end: a last_step left from an earlier session is stale.
    return max((int(row["step"]) for row in rows), default=recorded)


def run_progress(
    run: Path, info: Mapping[str, Any], status: str, rows: Sequence[MetricRow]
) -> Progress:
    """How far ``run`` got and how long it ran. ``status`` as :func:`run_status` gives it
    and ``rows`` its metric rows (``read_metrics``). A ``crashed`` run's duration is the
    time its processes ran up to their last write, counted as a resume counts it: earlier
    sessions plus this session from its start to that write."""
    step = _last_step(info, rows)
    if status != "crashed" or _ended(info):
        return Progress(step, recorded_duration(info))
    written = last_written(run)
    start = _number(info.get("session_started", info.get("started")))
    if written is None or start is None or written < start:
        return Progress(step, None, CRASHED_NOTE, written)
    earlier = _number(info.get("earlier_sessions_s")) or 0.0
    return Progress(step, round(earlier + written - start, 3), CRASHED_NOTE, written)
