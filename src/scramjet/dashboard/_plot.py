"""Text line plots for the terminal: pure functions, no terminal and no threads.

A curve is drawn on a character grid ``divisor`` rows high and ``span`` columns wide.
Each stage (``train``, ``eval``, ...) has its own marker, so several stages share one
plot. Points are placed by their step (x) value, so a per-step train curve and
per-epoch eval points line up in time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

#: Marker of each stage, in the order stages first appear (cycled if there are more).
MARKERS: tuple[str, ...] = ("•", "o", "x", "+", "*", "#")

Points = Sequence[tuple[float, float]]


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean of ``values`` over ``window`` items (the first items average fewer).

    Args:
        values: The raw series.
        window: Number of items averaged (1 returns the values unchanged).

    Returns:
        A list as long as ``values``; NaN and infinite items are skipped inside a window.

    Example:
        >>> moving_average([1.0, 2.0, 3.0, 4.0], 2)
        [1.0, 1.5, 2.5, 3.5]
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1; received {window!r}.")
    if window == 1:
        return [float(v) for v in values]
    out: list[float] = []
    for i in range(len(values)):
        chunk = [float(v) for v in values[max(0, i - window + 1) : i + 1] if math.isfinite(v)]
        out.append(sum(chunk) / len(chunk) if chunk else math.nan)
    return out


def _format_tick(value: float) -> str:
    return f"{value:.4g}"


def _visible(series: Mapping[str, Points], span: int) -> tuple[float, float] | None:
    """The x range to draw: the last ``span`` steps of the furthest-reaching stage."""
    xs = [x for pts in series.values() for x, y in pts if math.isfinite(y)]
    if not xs:
        return None
    x_end = max(xs)
    # Steps are integers in practice: span columns cover the last span steps; fewer
    # steps than that are spread over the whole width.
    return max(min(xs), x_end - span + 1), x_end


def _columns(
    series: Mapping[str, Points], x_lo: float, x_hi: float, span: int
) -> dict[str, dict[int, float]]:
    """Mean value per column for each stage, for the points inside ``[x_lo, x_hi]``."""
    width = max(x_hi - x_lo, 1e-12)
    out: dict[str, dict[int, float]] = {}
    for stage, pts in series.items():
        sums: dict[int, list[float]] = {}
        for x, y in pts:
            if x < x_lo or x > x_hi or not math.isfinite(y):
                continue
            col = min(span - 1, max(0, round((x - x_lo) / width * (span - 1))))
            sums.setdefault(col, []).append(y)
        out[stage] = {c: sum(v) / len(v) for c, v in sums.items()}
    return out


def render_curve(
    series: Mapping[str, Points],
    *,
    span: int = 30,
    divisor: int = 10,
    window: int = 1,
) -> list[str]:
    """Draw one metric as text lines: y labels, a framed grid, and a legend line.

    Args:
        series: ``{stage: [(x, y), ...]}`` in increasing x; x is usually the step.
        span: Width of the x axis in steps (and in character columns).
        divisor: Number of rows the y axis is divided into (>= 2).
        window: Moving-average window applied to each stage before drawing.

    Returns:
        The lines of the plot (no trailing newlines). A single line saying
        ``(no data yet)`` when there is nothing finite to draw.

    Example:
        >>> lines = render_curve({"train": [(1, 1.0), (2, 0.5)]}, span=4, divisor=2)
        >>> lines[0], lines[1]
        ('   1 ┤•   ', ' 0.5 ┤   •')
    """
    if isinstance(span, bool) or not isinstance(span, int) or span < 2:
        raise ValueError(f"span must be an int >= 2 (columns of the x axis); received {span!r}.")
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 2:
        raise ValueError(f"divisor must be an int >= 2 (rows of the y axis); received {divisor!r}.")
    smoothed = {
        stage: list(zip([p[0] for p in pts], moving_average([p[1] for p in pts], window)))
        for stage, pts in series.items()
    }
    bounds = _visible(smoothed, span)
    if bounds is None:
        return ["(no data yet)"]
    x_lo, x_hi = bounds
    cols = _columns(smoothed, x_lo, x_hi, span)
    values = [v for per_stage in cols.values() for v in per_stage.values()]
    y_lo, y_hi = min(values), max(values)
    if y_hi - y_lo < 1e-12:
        y_lo, y_hi = y_lo - 0.5 * max(abs(y_lo), 1.0), y_hi + 0.5 * max(abs(y_hi), 1.0)
    grid = [[" "] * span for _ in range(divisor)]
    for i, stage in enumerate(cols):
        marker = MARKERS[i % len(MARKERS)]
        for col, value in cols[stage].items():
            row = round((y_hi - value) / (y_hi - y_lo) * (divisor - 1))
            grid[row][col] = marker
    labels = [_format_tick(y_hi - r * (y_hi - y_lo) / (divisor - 1)) for r in range(divisor)]
    pad = max(len(s) for s in labels) + 1
    lines = [f"{lab:>{pad}} ┤{''.join(row)}" for lab, row in zip(labels, grid)]
    lo_text, hi_text = f"{x_lo:g}", f"{x_hi:g}"
    lines.append(" " * pad + " └" + "─" * span)
    gap = max(1, span - len(lo_text) - len(hi_text))
    lines.append(" " * (pad + 2) + lo_text + " " * gap + hi_text)
    legend = "   ".join(f"{MARKERS[i % len(MARKERS)]} {s}" for i, s in enumerate(cols))
    lines.append(" " * (pad + 2) + legend)
    return lines
