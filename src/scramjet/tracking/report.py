"""Plots and the self-contained ``report.html`` of a run, and side-by-side comparisons.

Everything here reads a run folder (``hyperparams.json``, ``environment.json``,
``metrics.jsonl``, ``results/*.json``), so a report can be rebuilt at any time with
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking.loggers.csv import metric_series, read_metrics

_LOSS_NAMES = ("train_loss_epoch", "eval_loss_epoch")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


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


def _plot_lines(
    title: str, lines: Sequence[tuple[str, list[int], list[float]]], xlabel: str
) -> bytes:
    fig, ax = _figure()
    for label, xs, ys in lines:
        marker = "o" if len(xs) <= 30 else None
        ax.plot(xs, ys, label=label, marker=marker, linewidth=1.6)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    if len(lines) > 1:
        ax.legend(fontsize=8)
    return _png_bytes(fig)


def build_plots(run_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``plots/loss.png`` (and ``plots/train_loss_step.png``) and one PNG per metric.

    Returns:
        ``{plot name: path}`` in display order.
    """
    run = Path(run_dir)
    plots = run / "plots"
    plots.mkdir(exist_ok=True)
    rows = read_metrics(run)
    epoch, step = metric_series(rows, "epoch"), metric_series(rows, "step")
    out: dict[str, Path] = {}
    loss_lines = [(n, *epoch[n]) for n in _LOSS_NAMES if n in epoch]
    if loss_lines:
        out["loss"] = _write(plots / "loss.png", _plot_lines("loss per epoch", loss_lines, "epoch"))
    for name, (xs, ys) in sorted(step.items()):
        out[f"{name}_step"] = _write(
            plots / f"{_safe(name)}_step.png",
            _plot_lines(f"{name} per step", [(name, xs, ys)], "step"),
        )
    for name, (xs, ys) in sorted(epoch.items()):
        if name in _LOSS_NAMES:
            continue
        out[name] = _write(
            plots / f"{_safe(name)}.png", _plot_lines(name, [(name, xs, ys)], "epoch")
        )
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _write(path: Path, data: bytes) -> Path:
    # Imported here: scramjet.runtime imports torch, which ``scramjet report`` never needs.
    from scramjet.runtime.files import atomic_write_bytes

    atomic_write_bytes(path, data, fsync=False)
    return path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(data: bytes, alt: str) -> str:
    encoded = base64.b64encode(data).decode("ascii")
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}"></figure>'


_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 8px;
font-size:13px;text-align:left}th{background:#f0f3f7}figure{display:inline-block;margin:6px}
img{max-width:600px}h2{border-bottom:2px solid #4a7bd0;padding-bottom:3px}
.diff{background:#fff3c4}
"""


def _page(title: str, sections: Sequence[str]) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        + "".join(sections)
        + "</body></html>"
    )


def _epoch_table(rows: list[Any]) -> str:
    series = metric_series(rows, "epoch")
    names = sorted(series)
    epochs = sorted({e for xs, _ in series.values() for e in xs})
    table = []
    for e in epochs:
        line: list[Any] = [e]
        for n in names:
            xs, ys = series[n]
            line.append(ys[len(xs) - 1 - xs[::-1].index(e)] if e in xs else "")
        table.append(line)
    return _table(table, ["epoch", *names])


def build_report(run_dir: str | os.PathLike[str], *, plots: bool = True) -> Path:
    """(Re)build ``<run>/report.html``: hyperparameters, metric tables, plots, results, environment.

    Returns:
        The report path.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"run folder {str(run)!r} does not exist; pass a run folder.")
    images = (
        build_plots(run) if plots else {p.stem: p for p in sorted((run / "plots").glob("*.png"))}
    )
    hyper = _read_json(run / "hyperparams.json")
    env = _read_json(run / "environment.json")
    rows = read_metrics(run)
    sections = [f"<p>Run folder: <code>{html.escape(str(run.resolve()))}</code></p>"]
    sections.append(
        "<h2>Hyperparameters</h2>" + _table(sorted(_flat(hyper).items()), ["name", "value"])
    )
    sections.append("<h2>Metrics per epoch</h2>" + _epoch_table(rows))
    sections.append("<h2>Plots</h2>" + "".join(_img(p.read_bytes(), n) for n, p in images.items()))
    results = sorted((run / "results").glob("*.json")) if (run / "results").is_dir() else []
    for path in results:
        data = _read_json(path)
        scalars = [(k, v) for k, v in _flat(data).items() if not isinstance(v, list)]
        sections.append(
            f"<h2>Results: {html.escape(path.stem)}</h2>" + _table(scalars, ["metric", "value"])
        )
    sections.append("<h2>Environment</h2>" + _table(sorted(_flat(env).items()), ["name", "value"]))
    out = run / "report.html"
    title = f"{hyper.get('project', '')} / {run.name}" if isinstance(hyper, dict) else run.name
    _write(out, _page(title, sections).encode("utf-8"))
    return out


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def compare_runs(runs: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str]) -> Path:
    """Write one HTML page comparing runs: overlaid curves, hyperparameter diff, final metrics.

    Args:
        runs: two or more run folders.
        output: the HTML file to write.
    """
    paths = [Path(r) for r in runs]
    missing = [str(p) for p in paths if not p.is_dir()]
    if missing:
        raise FileNotFoundError(f"run folder(s) not found: {missing}; pass existing run folders.")
    names = [p.name for p in paths]
    all_rows = [read_metrics(p) for p in paths]
    sections = []
    hypers = [_flat(_read_json(p / "hyperparams.json")) for p in paths]
    keys = sorted(set().union(*hypers))
    diff = [
        [k, *(h.get(k, "") for h in hypers)]
        for k in keys
        if len({json.dumps(h.get(k), default=str) for h in hypers}) > 1
    ]
    sections.append("<h2>Hyperparameters that differ</h2>" + _table(diff, ["name", *names]))
    epoch_series = [metric_series(rows, "epoch") for rows in all_rows]
    final = []
    for metric in sorted(set().union(*epoch_series)):
        final.append([metric, *(s[metric][1][-1] if metric in s else "" for s in epoch_series)])
    sections.append("<h2>Final epoch metrics</h2>" + _table(final, ["metric", *names]))
    imgs = []
    for metric in sorted(set().union(*epoch_series)):
        lines = [(n, *s[metric]) for n, s in zip(names, epoch_series) if metric in s]
        imgs.append(_img(_plot_lines(metric, lines, "epoch"), metric))
    step_series = [metric_series(rows, "step") for rows in all_rows]
    for metric in sorted(set().union(*step_series)):
        lines = [(n, *s[metric]) for n, s in zip(names, step_series) if metric in s]
        imgs.append(_img(_plot_lines(f"{metric} per step", lines, "step"), metric))
    sections.append("<h2>Curves</h2>" + "".join(imgs))
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write(out, _page("Run comparison: " + ", ".join(names), sections).encode("utf-8"))
    return out


__all__ = ["build_plots", "build_report", "compare_runs"]
