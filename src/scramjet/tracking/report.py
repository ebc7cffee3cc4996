"""Plots and the self-contained ``report.html`` of a run, and side-by-side comparisons.

Everything here reads a run folder (``run.json``, ``hyperparams.json``,
``environment.json``, ``metrics.jsonl``, ``results/*.json``), so a report can be rebuilt at any time with
``scramjet report RUN``. Figures are drawn with matplotlib's object API on an Agg
canvas: matplotlib's global state and style are never touched.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking import _report_parts as parts
from scramjet.tracking._files import run_status
from scramjet.tracking._progress import run_progress
from scramjet.tracking.loggers.base import MetricRow
from scramjet.tracking.loggers.csv import metric_series, read_metrics

_LOSS_NAMES = ("train_loss_epoch", "eval_loss_epoch")
#: The longest plot file stem, well under the 255 bytes a file name holds (``.png`` and
#: a hash are added to a cut one).
_MAX_STEM_BYTES = 160


def _figure() -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.8), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _png_bytes(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    return buf.getvalue()


_LINE_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))


def _line_figure(
    title: str,
    lines: Sequence[tuple[str, list[int], list[float]]],
    xlabel: str,
    missing: set[str] | None = None,
    runs: Sequence[int] | None = None,
) -> tuple[Any, Any]:
    """A figure with one line per ``(label, xs, ys)``; whole-number ticks on the x axis.

    Names are drawn as written: a ``$`` never starts math text (``$\\foo$`` would raise),
    and a label starting with ``_`` is in the legend too (matplotlib hides such labels).
    A glyph no installed font has is drawn as ``?`` and added to ``missing`` (without
    ``missing``: one warning for this figure). ``runs``: each line's run in a comparison,
    which then keeps its colour, line and marker in every plot (ten colours, then other
    lines and markers) and is always in the legend."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.ticker import MaxNLocator

    absent: set[str] = set()
    families, drawn = _plot_fonts([title, *(label for label, _, _ in lines)], absent)
    if missing is None:
        _warn_missing_glyphs(absent, f"the plot {title!r}")
    else:
        missing.update(absent)
    fig, ax = _figure()
    handles = []
    for k, (_, xs, ys) in enumerate(lines):
        i = runs[k] if runs is not None else k
        style, shape = _LINE_STYLES[i // 10 % len(_LINE_STYLES)]
        marker = shape if len(xs) <= 30 else None
        handles += ax.plot(xs, ys, marker=marker, linewidth=1.6, color=f"C{i % 10}", ls=style)
    ax.set_title(drawn[title], fontfamily=families, parse_math=False)
    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs and steps: no 1.5
    distinct = sorted({x for _, xs, _ in lines for x in xs})
    if len(distinct) == 1:  # one epoch or step: the locator would tick 0.96, 0.98, ...
        ax.set_xticks(distinct)
    if distinct and not any(math.isfinite(y) for _, _, ys in lines for y in ys):
        ax.set_xlim(distinct[0] - 0.5, distinct[-1] + 0.5)  # no point sets the axis
        ax.text(0.5, 0.5, "no finite value (each is nan or inf)", transform=ax.transAxes,
                ha="center", va="center", color="0.4")  # fmt: skip
    ax.grid(True, alpha=0.3)
    if len(lines) > 1 or runs is not None:
        labels = [drawn[label] for label, _, _ in lines]
        legend = ax.legend(handles, labels, prop=FontProperties(family=families, size=8))
        for text in legend.get_texts():
            text.set_parse_math(False)
    return fig, ax


def _plot_fonts(texts: list[str], missing: set[str]) -> tuple[list[str], dict[str, str]]:
    """The font families that draw ``texts`` (the dashboard's choice: the default font,
    then installed fonts that have the glyphs it lacks) and each text as drawn, with
    ``?`` for a glyph no installed font has, added to ``missing`` (no warning per glyph)."""
    from scramjet.dashboard._fonts import plot_fonts

    with warnings.catch_warnings():  # its warning names a dashboard metric: ours is below
        warnings.simplefilter("ignore", RuntimeWarning)
        families, drawn = plot_fonts(texts[0], texts)
    missing.update(c for t in texts for c, d in zip(t, drawn[t]) if c != d)
    return families, drawn


def _warn_missing_glyphs(missing: set[str], page: str) -> None:
    """One warning for a page whose plots show ``?`` for glyphs no installed font has."""
    if missing:
        warnings.warn(
            f"report: no installed font has the glyphs {''.join(sorted(missing))!r} of the "
            f"names plotted in {page}; its plots show '?' in their place (the page's tables "
            "and metrics.jsonl keep the names). Install a font that has them (e.g. Noto "
            "Sans CJK, Noto Emoji) and run `scramjet report` again to draw them.",
            RuntimeWarning,
            stacklevel=3,
        )


def _plot_lines(
    title: str,
    lines: Sequence[tuple[str, list[int], list[float]]],
    xlabel: str,
    missing: set[str] | None = None,
    runs: Sequence[int] | None = None,
) -> bytes:
    return _png_bytes(_line_figure(title, lines, xlabel, missing, runs)[0])


def _epoch_curves(
    rows: Sequence[Any], by_step: bool | None = None
) -> tuple[dict[str, tuple[list[int], list[float]]], str]:
    """The epoch metrics as curves and their x axis: against the epoch, or against the step
    when an epoch has more than one row (evaluations in the middle of an epoch, which would
    otherwise stack on one x). ``by_step`` forces one or the other."""
    series = metric_series(rows, "epoch")
    if by_step is None:
        by_step = _has_mid_epoch_rows(series)
    if not by_step:
        return series, "epoch"
    steps: dict[str, tuple[list[int], list[float]]] = {}
    for row in rows:
        if row["scope"] == "epoch":
            for name, value in row["metrics"].items():
                xs, ys = steps.setdefault(name, ([], []))
                xs.append(row["step"])
                ys.append(value)
    return steps, "step"


def _has_mid_epoch_rows(series: dict[str, tuple[list[int], list[float]]]) -> bool:
    """Whether some metric has two rows in one epoch."""
    return any(len(set(xs)) < len(xs) for xs, _ in series.values())


def build_plots(run_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``plots/loss.png`` (and ``plots/train_loss_step.png``) and one PNG per metric.

    Returns:
        ``{plot name: path}`` in display order.
    """
    run = Path(run_dir)
    plots = run / "plots"
    plots.mkdir(exist_ok=True)
    rows = read_metrics(run)
    (epoch, axis), step = _epoch_curves(rows), metric_series(rows, "step")
    out: dict[str, Path] = {}
    taken: set[str] = set()
    missing: set[str] = set()
    loss_lines = [(n, *epoch[n]) for n in _LOSS_NAMES if n in epoch]
    if loss_lines:
        title = "loss per epoch" if axis == "epoch" else "loss per step (evaluations within epochs)"
        _add_plot(out, taken, plots, "loss", "", _plot_lines(title, loss_lines, axis, missing))
    for name, (xs, ys) in sorted(step.items()):
        figure = _plot_lines(f"{name} per step", [(name, xs, ys)], "step", missing)
        _add_plot(out, taken, plots, name, "_step", figure)
    for name, (xs, ys) in sorted(epoch.items()):
        if name not in _LOSS_NAMES:
            figure = _plot_lines(name, [(name, xs, ys)], axis, missing)
            _add_plot(out, taken, plots, name, "", figure)
    _warn_missing_glyphs(missing, f"the report of {run}")
    return out


def _add_plot(
    out: dict[str, Path], taken: set[str], plots: Path, name: str, suffix: str, data: bytes
) -> None:
    """Write the plot of ``name`` to a file no other plot of the run uses and add it to
    ``out`` under ``name + suffix`` (or, if a plot already has that key, its file stem)."""
    stem = _plot_stem(name, suffix, taken)
    key = name + suffix
    out[key if key not in out else stem] = _write(plots / f"{stem}.png", data)


def _plot_stem(name: str, suffix: str, taken: set[str]) -> str:
    """``name``'s characters that are safe in a file name, then ``suffix``; a name that
    another plot's file already has (``val/acc`` and ``val_acc``, a metric named ``loss``;
    compared without case, for case-insensitive file systems) or too long for a file name
    (at most 255 bytes, counting the temporary name of the atomic write) is cut and ends
    with a hash of the metric name instead."""
    from scramjet.runtime.files import digest_stem, safe_stem

    stem = safe_stem(name) + suffix
    if stem.casefold() in taken or len(stem.encode()) > _MAX_STEM_BYTES:
        stem = digest_stem(stem, name + suffix, _MAX_STEM_BYTES)
    taken.add(stem.casefold())
    return stem


def _write(path: Path, data: bytes) -> Path:
    # Imported here: scramjet.runtime imports torch, which ``scramjet report`` never needs.
    from scramjet.runtime.files import atomic_write_bytes

    atomic_write_bytes(path, data, fsync=False)
    return path


def _img(data: bytes, alt: str) -> str:
    encoded = base64.b64encode(data).decode("ascii")
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}"></figure>'


_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 8px;
font-size:13px;text-align:left;overflow-wrap:anywhere}code{overflow-wrap:anywhere}
td:first-child,th:first-child{overflow-wrap:break-word}th{background:#f0f3f7}figure{display:inline-block;margin:6px}
img{max-width:600px}h2{border-bottom:2px solid #4a7bd0;padding-bottom:3px}h3{margin-bottom:4px}
table.summary th{width:150px}.status{padding:2px 10px;border-radius:10px;font-weight:600}
.ok{background:#d6f5d6;color:#135e13}.info{background:#dbe8fb;color:#1d4f91}
.bad{background:#fbd9d9;color:#8d1c1c}.warn{background:#fdebc8;color:#7a4b00}
.warning{background:#fff3c4;border-left:4px solid #e0a800;padding:6px 10px;margin:6px 0}
table.confusion td.cm{text-align:right;min-width:36px}table.confusion th.corner{font-size:11px}
.diff{background:#fff3c4}details{margin:6px 0 18px}summary{cursor:pointer}
"""


COMPARISON_MARK = "<meta name='scramjet-page' content='comparison'>"


def is_comparison_page(path: Path) -> bool:
    """Whether ``path`` is a comparison page :func:`compare_runs` wrote (its mark is in the
    page's head), which a new comparison may replace."""
    try:
        with open(path, "rb") as file:
            return COMPARISON_MARK.encode() in file.read(512)
    except OSError:
        return False


def _page(title: str, sections: Sequence[str], mark: str = "") -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'>{mark}"
        f"<title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        + "".join(sections)
        + "</body></html>"
    )


def _epoch_table(rows: list[Any]) -> str:
    series = metric_series(rows, "epoch")
    names = sorted(series)
    epochs = sorted({e for xs, _ in series.values() for e in xs})
    lines = []
    for e in epochs:
        line: list[Any] = [e]
        for n in names:
            xs, ys = series[n]
            line.append(ys[len(xs) - 1 - xs[::-1].index(e)] if e in xs else "")
        lines.append(line)
    return parts.table(lines, ["epoch", *names])


def build_report(run_dir: str | os.PathLike[str], *, plots: bool = True) -> Path:
    """(Re)build ``<run>/report.html``: one offline file that describes the run.

    In order: the run (status, start and end, duration, host, CPU and GPU model, world
    size, versions), warnings where a declared hyperparameter contradicts what the run
    used, the hyperparameters (yours, then the training setup: optimizer and its learning
    rate, betas and weight decay, scheduler, batch sizes, accumulation, precision), each
    result file (with its confusion matrix and per-class metrics when it has one), the
    metrics per epoch, the plots, and the environment.

    Returns:
        The report path.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"run folder {str(run)!r} does not exist; pass a run folder.")
    images = (
        build_plots(run) if plots else {p.stem: p for p in sorted((run / "plots").glob("*.png"))}
    )
    hyper = parts.as_dict(parts.read_json(run / "hyperparams.json"))
    env = parts.as_dict(parts.read_json(run / "environment.json"))
    info = parts.as_dict(parts.read_json(run / "run.json"))
    rows = read_metrics(run)
    progress = run_progress(run, info, run_status(info), rows)
    sections = [
        f"<p>Run folder: <code>{html.escape(str(run.resolve()))}</code></p>",
        parts.summary_section(info, env, hyper, progress),
        parts.hyperparams_section(hyper),
    ]
    for path in parts.result_files(run):
        sections.append(parts.results_section(path.stem, parts.read_json(path)))
    sections.append("<h2>Metrics per epoch</h2>" + _epoch_table(rows))
    sections.append("<h2>Plots</h2>" + "".join(_img(p.read_bytes(), n) for n, p in images.items()))
    sections.append(
        "<h2>Environment</h2>" + parts.table(parts.environment_rows(env), ["name", "value"])
    )
    out = run / "report.html"
    project = hyper.get("project") or info.get("project") or ""
    title = f"{project} / {run.name}" if project else run.name
    _write(out, _page(title, sections).encode("utf-8"))
    return out


def _differences(names: list[str], values: list[dict[str, Any]]) -> list[list[Any]]:
    keys = list(dict.fromkeys(k for v in values for k in v))
    return [
        [k, *(v.get(k, "") for v in values)]
        for k in keys
        if len({_comparable(v.get(k)) for v in values}) > 1
    ]


def _comparable(value: Any) -> str:
    """A text equal for equal settings: numbers by value (``0`` is ``0.0``), the rest as JSON."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int) and abs(value) < 2**53:
        return repr(float(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(_comparable(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted((str(k), _comparable(v)) for k, v in value.items())
        return "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in items) + "}"
    return json.dumps(value, default=str)


def _run_rows(
    paths: list[Path], epochs: list[int], metric_rows: list[list[MetricRow]]
) -> list[list[Any]]:
    """Status, times, host, the last step and the epochs with metric rows, per run (a run
    that ended early shows fewer epochs beside the others' final metrics; a crashed run
    its last step and its time up to its last write, from its files)."""
    columns = []
    for path, reached, rows in zip(paths, epochs, metric_rows, strict=True):
        info = parts.as_dict(parts.read_json(path / "run.json"))
        status = run_status(info)
        progress = run_progress(path, info, status, rows)
        columns.append(
            {
                "status": status,
                "started": parts.format_time(info.get("started")),
                "duration": progress.duration_text(parts.format_duration),
                "host": info.get("host", ""),
                "last step": "" if progress.last_step is None else progress.last_step,
                "epochs": reached,
            }
        )
    keys = ("status", "started", "duration", "host", "last step", "epochs")
    return [[key, *(column[key] for column in columns)] for key in keys]


def _settings(path: Path) -> dict[str, Any]:
    """Declared hyperparameters, then the training setup, then the rest, by display name."""
    hyper = parts.as_dict(parts.read_json(path / "hyperparams.json"))
    out = {f"hyperparams.{k}": v for k, v in parts.flat(hyper.get("hyperparams")).items()}
    out.update(dict(parts.setup_rows(hyper)))
    out.update(dict(parts.other_rows(hyper)))
    return out


def _results_rows(paths: list[Path]) -> list[list[Any]]:
    """``[result.metric, value per run]`` for every scalar of every result file."""
    per_run = []
    for path in paths:
        values: dict[str, Any] = {}
        for file in parts.result_files(path):
            for key, value in parts.flat(parts.read_json(file)).items():
                if not isinstance(value, list):
                    values[f"{file.stem}.{key}"] = value
        per_run.append(values)
    keys = sorted({k for v in per_run for k in v})
    return [[k, *(v.get(k, "") for v in per_run)] for k in keys]


def _compare_matrices(paths: list[Path], labels: list[str]) -> str:
    """Each run's confusion matrix, side by side, for every result file that has one."""
    names = sorted({f.stem for p in paths for f in parts.result_files(p)})
    out = []
    for name in names:
        cells = []
        for path, label in zip(paths, labels, strict=True):
            found = parts.matrix_of(parts.read_json(path / "results" / f"{name}.json"))
            if found is not None:
                table = parts.confusion_html(f"{name}-{label}", *found)
                cells.append(f"<figure><figcaption>{html.escape(label)}</figcaption>{table}")
                cells[-1] += "</figure>"
        if cells:
            out.append(f"<h3>Confusion matrices: {html.escape(name)}</h3>" + "".join(cells))
    return "".join(out)


def compare_runs(runs: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str]) -> Path:
    """Write one HTML page comparing runs: status, results, hyperparameter differences, curves.

    Args:
        runs: two or more run folders.
        output: the HTML file to write.
    """
    paths = [Path(r) for r in runs]
    missing = [str(p) for p in paths if not p.is_dir()]
    if missing:
        raise FileNotFoundError(f"run folder(s) not found: {missing}; pass existing run folders.")
    names = parts.run_labels(paths)  # the folder names, unless two runs share one
    all_rows = [read_metrics(p) for p in paths]
    epoch_series = [metric_series(rows, "epoch") for rows in all_rows]
    epochs = [max((max(xs) for xs, _ in s.values()), default=0) for s in epoch_series]
    runs_table = parts.table(_run_rows(paths, epochs, all_rows), ["", *names])
    sections = ["<h2>Runs</h2>" + runs_table]
    results = _results_rows(paths)
    sections.append(
        "<h2>Results</h2>"
        + (parts.table(results, ["metric", *names]) if results else "<p>No result files.</p>")
    )
    sections.append(_compare_matrices(paths, names))
    diff = _differences(names, [_settings(p) for p in paths])
    sections.append(
        "<h2>Hyperparameters that differ</h2>"
        + (parts.table(diff, ["name", *names]) if diff else "<p>None: the runs share them.</p>")
    )
    final = []
    for metric in sorted(set().union(*epoch_series)):
        final.append([metric, *(s[metric][1][-1] if metric in s else "" for s in epoch_series)])
    sections.append("<h2>Final epoch metrics</h2>" + parts.table(final, ["metric", *names]))
    imgs: list[str] = []
    glyphs: set[str] = set()
    by_step = any(_has_mid_epoch_rows(s) for s in epoch_series)  # one x axis for all runs
    curves = [_epoch_curves(rows, by_step) for rows in all_rows]
    axis = curves[0][1] if curves else "epoch"
    for metric in sorted(set().union(*epoch_series)):
        shown = [i for i, (c, _) in enumerate(curves) if metric in c]
        lines = [(names[i], *curves[i][0][metric]) for i in shown]
        imgs.append(_img(_plot_lines(metric, lines, axis, glyphs, shown), metric))
    step_series = [metric_series(rows, "step") for rows in all_rows]
    for metric in sorted(set().union(*step_series)):
        shown = [i for i, s in enumerate(step_series) if metric in s]
        lines = [(names[i], *step_series[i][metric]) for i in shown]
        title = f"{metric} per step"
        imgs.append(_img(_plot_lines(title, lines, "step", glyphs, shown), metric))
    sections.append("<h2>Curves</h2>" + "".join(imgs))
    _warn_missing_glyphs(glyphs, "the comparison")
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    page = _page("Run comparison: " + ", ".join(names), sections, COMPARISON_MARK)
    _write(out, page.encode("utf-8"))
    return out


__all__ = ["build_plots", "build_report", "compare_runs"]


def report_of_an_ended_run(run_dir: str | Path) -> None:
    """``report.html`` of a run that finished, failed or was interrupted.

    Written atomically, so a Ctrl-C while it is built leaves no partial page. A report
    that cannot be built (e.g. a plotting library left broken) is a warning, never an
    error: the report is made from the run's files, which are all written by then.
    """
    try:
        build_report(run_dir)
    except Exception as exc:
        warnings.warn(
            f"Experiment: the report of the ended run could not be built "
            f"({type(exc).__name__}: {exc}); the run's files are intact, and "
            f"`scramjet report {run_dir}` tries again.",
            RuntimeWarning,
            stacklevel=3,
        )
