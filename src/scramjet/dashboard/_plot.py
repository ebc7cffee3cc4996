"""Text line plots for the terminal: pure functions, no terminal and no threads.

A curve is drawn on a character grid ``divisor`` rows high and ``span`` columns wide.
Each stage (``train``, ``eval``, ...) has its own marker, so several stages share one
plot. Points are placed by their x value (progress in epochs), so a per-step train
curve and per-epoch eval points line up in time.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Collection, Mapping, Sequence

#: Marker of each stage, in the order stages first appear (cycled if there are more).
MARKERS: tuple[str, ...] = ("•", "o", "x", "+", "*", "#")

#: Widest x axis, in columns: far wider than any terminal (a curve is fitted to the
#: terminal's width anyway), small enough that a grid of it costs little memory.
MAX_SPAN = 10_000


def check_span(span: object) -> int:
    """``span`` itself when it is an int from 2 to :data:`MAX_SPAN`, else a ValueError."""
    if isinstance(span, bool) or not isinstance(span, int) or not 2 <= span <= MAX_SPAN:
        raise ValueError(
            f"span must be an int from 2 to {MAX_SPAN} (columns of the x axis, one per "
            f"point); received {span!r} ({type(span).__name__}). Pass the number of latest "
            f"points to draw, e.g. span=30; a terminal narrower than span shows fewer."
        )
    return span


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
        mean = sum(chunk) / len(chunk) if chunk else math.nan
        if math.isinf(mean):  # finite values whose sum overflows (1e308 + 1e308)
            mean = sum(v / len(chunk) for v in chunk)
        out.append(mean)
    return out


def smooths(points: Points) -> bool:
    """Whether a stage's curve is smoothed: only when it has several points in one epoch.

    A per-step series (training losses) is averaged over ``window`` points; a series with
    at most one point per epoch (evaluation results) is drawn as it is, since averaging it
    would mix different epochs' models.

    Example:
        >>> smooths([(0.5, 1.0), (1.0, 0.8)]), smooths([(1.0, 0.5), (2.0, 0.4)])
        (True, False)
    """
    epochs = [math.ceil(x - 1e-9) for x, _ in points]
    return len(set(epochs)) < len(epochs)


def smooth_series(points: Points, window: int) -> list[tuple[float, float]]:
    """``points`` with the moving average of :func:`moving_average` when :func:`smooths`.

    A point whose own value is NaN or infinite stays so: the average of its neighbours
    would draw a value the run never had (a diverged loss would look alive).
    """
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    if window > 1 and smooths(points):
        ys = [a if math.isfinite(y) else y for a, y in zip(moving_average(ys, window), ys)]
    return list(zip(xs, ys))


def _format_tick(value: float) -> str:
    return f"{value:.4g}"


def _format_x(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _visible(series: Mapping[str, Points], span: int) -> tuple[float, float, float] | None:
    """``(x_lo, x_hi, dx)``: the last ``span`` points of the densest stage, one column each.

    The densest stage (most points, e.g. per-step training values) sets the scale:
    each of its last ``span`` points gets a column ``dx`` apart; sparser stages
    (per-epoch evaluation) are placed by their x value on the same scale.
    """
    if not any(math.isfinite(y) for pts in series.values() for _, y in pts):
        return None
    # The axis covers every point, drawn or not: a curve that turns NaN stops short of
    # the axis' end instead of seeming to end at the newest step.
    placed = {s: [x for x, _ in pts if math.isfinite(x)] for s, pts in series.items()}
    placed = {s: xs for s, xs in placed.items() if xs}
    shown = max(placed.values(), key=len)[-span:]
    x_hi = max(max(xs) for xs in placed.values())
    x_lo = min(shown[0], x_hi)
    dx = (shown[-1] - shown[0]) / (len(shown) - 1) if len(shown) > 1 else 0.0
    if dx <= 0:
        dx = max(x_hi - x_lo, 1e-12) / (span - 1)
    return x_lo, min(x_hi, x_lo + dx * (span - 1)), dx


def _columns(
    series: Mapping[str, Points], x_lo: float, x_hi: float, dx: float, span: int
) -> dict[str, dict[int, float]]:
    """Mean value per column for each stage, for the points inside ``[x_lo, x_hi]``."""
    out: dict[str, dict[int, float]] = {}
    eps = dx * 1e-6
    for stage, pts in series.items():
        sums: dict[int, list[float]] = {}
        for x, y in pts:
            if x < x_lo - eps or x > x_hi + eps or not math.isfinite(y):
                continue
            col = min(span - 1, max(0, round((x - x_lo) / dx)))
            sums.setdefault(col, []).append(y)
        out[stage] = {c: sum(v) / len(v) for c, v in sums.items()}
    return out


def _y_range(values: Sequence[float], divisor: int) -> tuple[float, float]:
    """``(y_lo, y_hi)`` of the grid: the values' range, or for a constant a band of 20 %
    around it in which it falls on a row of its own, so the row's label is its value (a
    learning rate of 1e-9 is labelled 1e-09, never 0 or a negative number)."""
    y_lo, y_hi = min(values), max(values)
    if y_hi - y_lo > 1e-9 * max(abs(y_lo), abs(y_hi)):  # relative: tiny values vary too
        return y_lo, y_hi
    step = (0.2 * abs(y_hi) or 2e-6) / (divisor - 1)
    above = (divisor - 1) // 2  # rows above the value's
    if abs(y_hi) + step * (divisor - 1) > sys.float_info.max:  # near the largest float:
        above = 0 if y_hi > 0 else divisor - 1  # the value on the top or bottom row, never inf
    return y_hi - step * (divisor - 1 - above), y_hi + step * above


def _ticks(y_lo: float, y_hi: float, divisor: int) -> list[float]:
    """The value of each row, top first: weighted between the two ends, so the top and
    bottom labels are the values drawn there (``y_hi - (y_hi - y_lo)`` is 0, not 0.9, when
    y_hi is 1e29), and the rounding residue of an inner row at zero is shown as 0."""
    k = _scale(y_hi, y_lo)
    step = (y_hi * k - y_lo * k) / (divisor - 1)  # of the values times k
    out = []
    for r in range(divisor):
        tick = y_hi * (1 - r / (divisor - 1)) + y_lo * (r / (divisor - 1))
        inner = 0 < r < divisor - 1
        out.append(0.0 if inner and abs(tick) * k <= 1e-9 * step else tick)
    return out


def _scale(a: float, b: float) -> float:
    """1, or 0.5 where ``a - b`` overflows a float (-1e308 to 1e308, a run that blew up)."""
    return 0.5 if math.isinf(a - b) else 1.0


def _x_axis(
    pad: int, span: int, x_lo: float, x_hi: float, dx: float, stages: list[str]
) -> list[str]:
    """The x axis line, its first and last labels, and the legend of stage markers."""
    lo_text, hi_text = _format_x(x_lo), _format_x(x_hi)
    last_col = min(span - 1, round((x_hi - x_lo) / dx))
    gap = max(1, last_col + 1 - len(lo_text) - len(hi_text))
    legend = "   ".join(f"{MARKERS[i % len(MARKERS)]} {s}" for i, s in enumerate(stages))
    return [
        " " * pad + " └" + "─" * span,
        " " * (pad + 2) + lo_text + " " * gap + hi_text,
        " " * (pad + 2) + legend,
    ]


def render_curve(
    series: Mapping[str, Points],
    *,
    span: int = 30,
    divisor: int = 10,
    window: int = 1,
    as_is: Collection[str] = (),
) -> list[str]:
    """Draw one metric as text lines: y labels, a framed grid, and a legend line.

    Args:
        series: ``{stage: [(x, y), ...]}`` in increasing x; x is the epoch progress
            (``epoch + (mile + 1) / mpe``), so stages with different steps per epoch line up.
        span: Width of the x axis: the last ``span`` points of the densest stage, one
            character column each (an int from 2 to :data:`MAX_SPAN`).
        divisor: Number of rows the y axis is divided into (>= 2).
        window: Moving-average window of the stages with several points per epoch
            (per-step values); a stage with one point per epoch (evaluation) is drawn as
            it is (see :func:`smooths`).
        as_is: Stages drawn as they are whatever their number of points per epoch
            (evaluation results, also several per epoch: each is a different model's).

    Returns:
        The lines of the plot (no trailing newlines). A single line saying
        ``(no data yet)`` when there is nothing finite to draw.

    Example:
        >>> lines = render_curve({"train": [(1, 1.0), (2, 0.5)]}, span=4, divisor=2)
        >>> lines[0], lines[1]
        ('   1 ┤•   ', ' 0.5 ┤ •  ')
    """
    check_span(span)
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 2:
        raise ValueError(f"divisor must be an int >= 2 (rows of the y axis); received {divisor!r}.")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1; received {window!r}.")
    smoothed = {
        stage: smooth_series(pts, 1 if stage in as_is else window) for stage, pts in series.items()
    }
    bounds = _visible(smoothed, span)
    if bounds is None:
        given = sum(len(pts) for pts in series.values())
        if not given:
            return ["(no data yet)"]
        return [f"(no finite value to draw: the last {_points(given)} NaN or infinite)"]
    x_lo, x_hi, dx = bounds
    cols = _columns(smoothed, x_lo, x_hi, dx, span)
    y_lo, y_hi = _y_range([v for per_stage in cols.values() for v in per_stage.values()], divisor)
    grid = [[" "] * span for _ in range(divisor)]
    k = _scale(y_hi, y_lo)
    for i, stage in enumerate(cols):
        marker = MARKERS[i % len(MARKERS)]
        for col, value in cols[stage].items():
            row = round((y_hi * k - value * k) / (y_hi * k - y_lo * k) * (divisor - 1))
            grid[row][col] = marker
    labels = [_format_tick(tick) for tick in _ticks(y_lo, y_hi, divisor)]
    pad = max(len(s) for s in labels) + 1
    lines = [f"{lab:>{pad}} ┤{''.join(row)}" for lab, row in zip(labels, grid)]
    lines.extend(_x_axis(pad, span, x_lo, x_hi, dx, list(cols)))
    eps = dx * 1e-6
    inside = [y for pts in series.values() for x, y in pts if x_lo - eps <= x <= x_hi + eps]
    bad = sum(1 for y in inside if not math.isfinite(float(y)))
    if bad:
        lines.append(
            " " * (pad + 2) + f"! {bad} of the last {_points(len(inside))} NaN or infinite "
            "(not drawn)"
        )
    return lines


def _points(n: int) -> str:
    return "point is" if n == 1 else f"{n} points are"
