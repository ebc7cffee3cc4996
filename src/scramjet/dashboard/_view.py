"""What the dashboard shows, as plain data, and how it is drawn.

A :class:`Snapshot` is taken from the dashboard's counters a few times per second by
the display thread; :func:`render` turns it into a rich renderable (terminal) and
:func:`plain_lines` into plain text lines (logs, CI). Both are pure, which is what
the golden test checks.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scramjet.dashboard._plot import render_curve

_BAR_FULL, _BAR_EMPTY = "█", "░"
_MIN_BAR = 5  # a narrower bar says too little: the row is shown without one


@dataclass(frozen=True)
class StageView:
    """Progress of one stage (``train``, ``eval``, ...) at the moment of the snapshot.

    Attributes:
        name: Stage name.
        epoch: 0-based epoch index (shown 1-based).
        epochs: Number of epochs of the run, if known.
        done: Steps done in this epoch.
        total: Steps in this epoch, if known.
        rate: Throughput in ``unit`` (NaN when unknown).
        unit: ``"samples/s"`` or ``"steps/s"``.
        eta: Seconds left in this epoch (NaN when unknown).
        finished: The stage's epoch is complete.
    """

    name: str
    epoch: int
    epochs: int | None
    done: int
    total: int | None
    rate: float
    unit: str
    eta: float
    finished: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Everything drawn in one refresh.

    Attributes:
        title: First line.
        stages: One progress row per stage, in the order the stages started.
        metrics: ``{stage: {name: formatted value}}``.
        curves: ``{metric: {stage: [(epoch progress, value), ...]}}`` for the plotted metrics.
        memory: One line about CPU/GPU memory (empty to hide it).
        span: Width of the x axis of the curves (points of the densest stage).
        divisor: Rows of the y axis of the curves.
        window: Moving-average window of the curves.
        recorded: Names of every metric with curve points, to name them where a chosen
            curve has none.
        as_is: ``(metric, stage)`` pairs drawn as they are, never averaged (results of
            evaluations, of which a run may have several per epoch).
    """

    title: str
    stages: list[StageView]
    metrics: dict[str, dict[str, str]]
    curves: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)
    memory: str = ""
    span: int = 30
    divisor: int = 10
    window: int = 1
    recorded: tuple[str, ...] = ()
    as_is: frozenset[tuple[str, str]] = frozenset()


def format_duration(seconds: float) -> str:
    """``h:mm:ss`` for a number of seconds; ``--:--`` when unknown.

    Example:
        >>> format_duration(3725.2)
        '1:02:05'
    """
    if not math.isfinite(seconds) or seconds < 0:
        return "--:--"
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _epoch_text(stage: StageView) -> str:
    return f"epoch {stage.epoch + 1}" + (f"/{stage.epochs}" if stage.epochs else "")


def _count_text(stage: StageView) -> str:
    return f"{stage.done}/{stage.total}" if stage.total else f"{stage.done}"


def _rate_text(stage: StageView) -> str:
    return f"{stage.rate:,.0f} {stage.unit}" if math.isfinite(stage.rate) else f"-- {stage.unit}"


def _eta_text(stage: StageView) -> str:
    if stage.finished and stage.total and stage.done < stage.total:
        return "ended early"  # a stop, a step limit or end_epoch() cut the epoch short
    if stage.finished:
        return "done"
    if not stage.total:  # unknown length (an iterable): a running count, no ETA to give
        return "running"
    return f"ETA {format_duration(stage.eta)}"


def bar(done: int, total: int | None, width: int) -> str:
    """A text progress bar ``width`` characters wide (all empty when total is unknown).

    Example:
        >>> bar(1, 4, 8)
        '██░░░░░░'
    """
    if not total or width <= 0:
        return _BAR_EMPTY * max(width, 0)
    filled = min(width, round(width * done / total))
    return _BAR_FULL * filled + _BAR_EMPTY * (width - filled)


def metrics_text(values: dict[str, str]) -> str:
    """``name value · name value`` in insertion order."""
    return " · ".join(f"{k} {v}" for k, v in values.items())


def plain_lines(snapshot: Snapshot, stages: Iterable[str] | None = None) -> list[str]:
    """One plain line per stage, for output that is not a terminal.

    Args:
        snapshot: What to print.
        stages: Only these stages (default: all).

    Returns:
        Lines such as ``train epoch 2/3 37/100 | 1,234 samples/s | ETA 0:00:03 | loss 0.1``.
    """
    wanted = None if stages is None else set(stages)
    lines = []
    for st in snapshot.stages:
        if wanted is not None and st.name not in wanted:
            continue
        parts = [f"{st.name} {_epoch_text(st)} {_count_text(st)}", _rate_text(st), _eta_text(st)]
        values = snapshot.metrics.get(st.name)
        if values:
            parts.append(metrics_text(values))
        if snapshot.memory:
            parts.append(snapshot.memory)
        lines.append(" | ".join(parts))
    return lines


def _progress_lines(snapshot: Snapshot, width: int) -> list[tuple[str, str, str]]:
    """``(stage label, bar, tail)`` per stage, the bar filling what the width leaves."""
    if not snapshot.stages:
        return []
    from rich.cells import cell_len

    # Widths in terminal cells: a CJK character takes two, so len() would wrap the row.
    name_w = max(cell_len(s.name) for s in snapshot.stages)
    heads = [f"{_pad(s.name, name_w)}  {_epoch_text(s)}" for s in snapshot.stages]
    head_w = max(cell_len(h) for h in heads)
    cols = [
        [_count_text(s) for s in snapshot.stages],
        [_rate_text(s) for s in snapshot.stages],
        [_eta_text(s) for s in snapshot.stages],
    ]
    widths = [max(len(c) for c in col) for col in cols]
    tails = [
        f"{cols[0][i]:>{widths[0]}}  {cols[1][i]:>{widths[1]}}  {cols[2][i]}"
        for i in range(len(snapshot.stages))
    ]
    tail_w = max(len(t) for t in tails)
    # The bar takes what the text leaves of the width; on a narrow terminal it shrinks,
    # then goes (an empty bar), so that a row stays one line as long as its text fits.
    bar_w = width - head_w - tail_w - 4
    bar_w = bar_w if bar_w >= _MIN_BAR else 0
    return [
        (_pad(h, head_w), bar(s.done, s.total, bar_w), f"{t:<{tail_w}}".rstrip())
        for h, s, t in zip(heads, snapshot.stages, tails)
    ]


def _pad(text: str, width: int) -> str:
    """``text`` followed by spaces up to ``width`` terminal cells."""
    from rich.cells import cell_len

    return text + " " * max(width - cell_len(text), 0)


def render(snapshot: Snapshot, width: int, height: int | None = None) -> Any:
    """A rich renderable of ``snapshot`` laid out for ``width`` columns.

    With ``height`` (the rows of a terminal redrawn in place), curves that would start
    below the screen are not drawn, only counted in one line: rich crops them anyway, and
    drawing hundreds of them would cost the display thread (and the loop, through the
    GIL) hundreds of milliseconds per redraw.
    """
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = [Text(snapshot.title, style="bold")]
    for head, bar_text, tail in _progress_lines(snapshot, width):
        line = Text()
        line.append(head, style="bold cyan")
        if bar_text:
            line.append("  ")
            line.append(bar_text, style="green")
        line.append("  " + tail)
        parts.append(line)
    for stage, values in snapshot.metrics.items():
        if values:
            line = Text()
            line.append(f"{stage}: ", style="bold")
            line.append(metrics_text(values))
            parts.append(line)
    if snapshot.memory:
        parts.append(Text(snapshot.memory, style="dim"))
    rows = sum(_rows(part.plain, width) for part in parts)
    for drawn, (metric, series) in enumerate(snapshot.curves.items()):
        if height is not None and rows >= height:
            parts.append(_hidden_curves(len(snapshot.curves) - drawn, height))
            break
        rows += snapshot.divisor + 4  # the caption, the grid and its axis, labels, legend
        if not any(series.values()):  # a chosen curve nothing was recorded under
            known = ", ".join(repr(n) for n in snapshot.recorded) or "none yet"
            parts.append(Text(f"{metric}: no values recorded yet (curves with values: {known})"))
            continue
        span, curve = fitted_curve(series, snapshot, width, metric)
        caption = f"{metric}  (moving average {snapshot.window}, last {span} points, x: epochs)"
        parts.append(Text(caption, style="bold"))
        # The grid is cropped, never wrapped; a note under it (or in its place) is wrapped,
        # so a narrow terminal still says that the values are NaN or infinite.
        grid_rows = snapshot.divisor + 3  # the rows, the axis, its labels, the legend
        grid, notes = (
            (curve[:grid_rows], curve[grid_rows:]) if len(curve) >= grid_rows else ([], curve)
        )
        if grid:
            parts.append(Text("\n".join(grid), no_wrap=True, overflow="crop"))
        parts.extend(Text(note if len(note) <= width else note.strip()) for note in notes)
    return Group(*parts)


def _rows(text: str, width: int) -> int:
    """Terminal rows ``text`` takes once wrapped at ``width`` columns."""
    from rich.cells import cell_len

    return sum(max(1, -(-cell_len(line) // max(width, 1))) for line in text.split("\n"))


def _hidden_curves(count: int, height: int) -> Any:
    from rich.text import Text

    return Text(
        f"... {count} more curve(s) below the screen ({height} rows): "
        "choose the ones to draw with Dashboard(curves=[...])",
        style="dim",
    )


def fitted_curve(
    series: dict[str, list[tuple[float, float]]], snapshot: Snapshot, width: int, metric: str = ""
) -> tuple[int, list[str]]:
    """``(span, lines)``: the curve with as many of the last ``snapshot.span`` points as
    fit in ``width`` columns, so a narrow terminal shows the newest points (cropping the
    right edge would hide them)."""
    span = max(2, min(snapshot.span, width))  # never a grid wider than the screen
    as_is = {stage for name, stage in snapshot.as_is if name == metric}
    for _ in range(3):  # fewer points may change the y labels' width: fit again
        lines = render_curve(
            series, span=span, divisor=snapshot.divisor, window=snapshot.window, as_is=as_is
        )
        widest = max(len(line) for line in lines[: snapshot.divisor])
        if widest <= width or span <= 2:
            break
        span = max(2, span - (widest - width))
    return span, lines


class LiveView:
    """The object handed to ``rich.live.Live``: asks for a fresh snapshot on every refresh."""

    def __init__(self, take_snapshot: Any, redrawn: Any = None) -> None:
        """``redrawn()``: whether the screen is still redrawn in place, so that curves
        below its last row are not drawn; false for the last frame, which stays printed
        whole (default: always redrawn)."""
        self._take_snapshot = take_snapshot
        self._redrawn = redrawn or (lambda: True)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        height = options.size.height if self._redrawn() else None
        yield render(self._take_snapshot(), options.max_width, height)


def memory_text() -> str:
    """CPU resident memory of this process and, if CUDA is in use, GPU memory per device.

    CUDA is never initialised here: GPU figures appear only once the program uses CUDA.
    """
    parts = []
    rss = _rss_bytes()
    if rss is not None:
        parts.append(f"CPU RSS {rss / 2**20:,.1f} MiB")
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            for i in range(torch.cuda.device_count()):
                used = torch.cuda.memory_allocated(i) / 2**30
                total = torch.cuda.get_device_properties(i).total_memory / 2**30
                parts.append(f"GPU cuda:{i} {used:.2f}/{total:.1f} GiB allocated")
    except Exception:  # a display must never break training
        pass
    return "memory: " + " · ".join(parts) if parts else ""


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)
    except Exception:
        return None
