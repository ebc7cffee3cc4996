"""Files written by ``Dashboard.log()``: one CSV and one PNG plot per metric.

The dashboard writes them with :func:`scramjet.runtime.files.atomic_write_bytes`, so a
crash while logging never leaves a half-written file behind.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from scramjet.runtime.files import digest_stem, safe_stem

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: One recorded value: (x = epoch progress, step, epoch, mile, value).
Row = tuple[float, int, int, int, float]

#: A series with fewer points has a marker on each; a longer one only on its isolated
#: points (see :func:`_isolated`), so a long line is not cluttered.
_MARK_ALL_BELOW = 50

#: Longest file stem, in UTF-8 bytes: with ``.csv`` and atomic_write's temporary
#: name, far below the 255 bytes a file system takes.
_MAX_STEM = 100


def file_stems(metrics: Iterable[str]) -> dict[str, str]:
    """A distinct, file-safe stem per metric (``log()`` adds ``.csv`` and ``.png``).

    Metrics whose safe names are the same, also in another case (``val/acc`` and
    ``val_acc``; ``Loss`` and ``loss``, one file on macOS and Windows), would share a
    file: each gets ``-<8 hex digits of its name's SHA-1>`` added, but for the first,
    in sorted order, of those that are their own safe name. A stem too long for a file
    name is cut and gets the digest too.

    Example:
        >>> file_stems(["val_acc", "val/acc", "損失"])
        {'val_acc': 'val_acc', 'val/acc': 'val_acc-76c8b4d4', '損失': '損失'}
    """
    stems = {metric: safe_stem(metric) for metric in metrics}
    groups: dict[str, list[str]] = {}
    for metric, stem in stems.items():
        groups.setdefault(stem.casefold(), []).append(metric)
    for names in groups.values():
        kept = sorted(n for n in names if stems[n] == n)[:1] if len(names) > 1 else names
        for name in names:
            stem = stems[name]
            if name not in kept or len(stem.encode()) > _MAX_STEM:
                stems[name] = digest_stem(stem, name, _MAX_STEM)
    return stems


def csv_bytes(series: Mapping[str, Sequence[Row]]) -> bytes:
    """CSV text with columns ``stage,epoch,mile,step,value``, stages in insertion order.

    ``epoch`` and ``mile`` are as given to ``gauge()`` (0-based); ``step`` counts the
    stage's steps from 1 over the whole run.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["stage", "epoch", "mile", "step", "value"])
    for stage, rows in series.items():
        for _, step, epoch, mile, value in rows:
            count = int(step) if float(step).is_integer() else repr(float(step))  # not 1.2e+06
            writer.writerow([stage, epoch, mile, count, repr(float(value))])
    return out.getvalue().encode("utf-8")


def png_bytes(
    metric: str, series: Mapping[str, Sequence[Row]], window: int, as_is: Collection[str] = ()
) -> bytes:
    """The PNG of :func:`plot_figure`."""
    buf = io.BytesIO()
    fig = plot_figure(metric, series, window, as_is)
    with np.errstate(over="ignore"):  # symlog's inverse of the outermost ticks
        fig.tight_layout()
        fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_figure(
    metric: str, series: Mapping[str, Sequence[Row]], window: int, as_is: Collection[str] = ()
) -> Figure:
    """A line plot of one metric, one line per stage (raw and moving average).

    Only stages with several points per epoch are averaged (the average drawn in the
    raw line's colour); per-epoch values (evaluation) and the stages in ``as_is``
    (evaluation results, also several per epoch) are drawn as they are. Every stage is
    in the legend, also one whose name starts with ``_`` (which matplotlib would hide).

    Uses a private matplotlib ``Figure`` with the Agg canvas: no pyplot, no global style.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties

    from scramjet.dashboard._fonts import plot_fonts
    from scramjet.dashboard._plot import smooth_series, smooths

    families, drawn = plot_fonts(metric, [metric, *series])
    fig = Figure(figsize=(7, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    handles, labels = [], []
    for stage, rows in series.items():
        xs = [r[0] for r in rows]
        ys = [float(r[4]) for r in rows]
        every = len(rows) < _MARK_ALL_BELOW
        if window > 1 and stage not in as_is and smooths(list(zip(xs, ys))):
            (raw,) = ax.plot(xs, ys, alpha=0.3, **_marks(ys, every))
            # NaN where the value is NaN: no averaged point the run never had
            average = [y for _, y in smooth_series(list(zip(xs, ys)), window)]
            handles += ax.plot(xs, average, color=raw.get_color(), **_marks(average, False))
            labels.append(f"{drawn[stage]} (avg {window})")
        else:
            handles += ax.plot(xs, ys, **_marks(ys, every))
            labels.append(drawn[stage])
    ax.set_xlabel("epoch")
    # Names are drawn as written: ``$`` never starts math text (``$\\foo$`` would raise).
    ax.set_ylabel(drawn[metric], fontfamily=families, parse_math=False)
    ax.set_title(drawn[metric], fontfamily=families, parse_math=False)
    ax.grid(True, alpha=0.3)
    if series:  # handles and labels given: a label starting with "_" is shown too
        legend = ax.legend(handles, labels, prop=FontProperties(family=families))
        for text in legend.get_texts():
            text.set_parse_math(False)
    if not _fits_linear_axis(series):
        ax.set_yscale("symlog")  # a linear axis over more than a float's range raises
    return fig


def _isolated(ys: Sequence[float]) -> list[int]:
    """Indices of the finite values with no finite neighbour (a value logged once between
    NaNs or gaps, a series of one value): a line has no segment there, so without a
    marker such a value is not drawn at all."""
    ok = [math.isfinite(y) for y in ys]
    last = len(ok) - 1
    return [
        i for i, f in enumerate(ok) if f and not (i and ok[i - 1]) and not (i < last and ok[i + 1])
    ]


def _marks(ys: Sequence[float], every_point: bool) -> dict[str, Any]:
    """Line style keywords: a marker on every point, or on the isolated points only (a
    long line stays uncluttered, a lone value still shows)."""
    if every_point:
        return {"marker": "o"}
    lone = _isolated(ys)
    return {"marker": "o", "markevery": lone} if lone else {"marker": None}


def _fits_linear_axis(series: Mapping[str, Sequence[Row]]) -> bool:
    """Whether the finite values' range is a float (``1e308 - -1e308`` is not)."""
    finite = [v for rows in series.values() for r in rows if math.isfinite(v := float(r[4]))]
    return not finite or math.isfinite(max(finite) - min(finite))


def append_record(path: Path, lines: Sequence[str]) -> None:
    """Append lines to a record file (created if missing), flushed to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        for line in lines:
            f.write(line.rstrip("\n") + "\n")
        f.flush()
        os.fsync(f.fileno())
