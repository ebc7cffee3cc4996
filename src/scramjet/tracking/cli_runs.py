"""``scramjet runs [ROOT]``: list tracked runs with their key metrics."""

from __future__ import annotations

import argparse
import datetime as _dt
import math
from pathlib import Path
from typing import Any

from scramjet.tracking._files import read_json
from scramjet.tracking.loggers.csv import metric_series, read_metrics


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``scramjet runs``."""
    parser.add_argument("root", nargs="?", default="runs", help="runs root folder (default: runs)")
    parser.add_argument("--project", help="only this project")
    parser.add_argument(
        "--metrics",
        default="train_loss_epoch,eval_loss_epoch",
        help="comma-separated metric names to show (last epoch value)",
    )


def find_runs(root: str | Path, project: str | None = None) -> list[Path]:
    """Run folders (those with ``run.json`` or ``hyperparams.json``) under ``root``, oldest first."""
    base = Path(root)
    found = [p.parent for p in base.glob("*/*/run.json")]
    found += [p.parent for p in base.glob("*/*/hyperparams.json") if p.parent not in found]
    if project:
        found = [p for p in found if p.parent.name == project]
    return sorted(found, key=lambda p: (_started(_info(p)), str(p)))


def _info(run: Path) -> dict[str, Any]:
    info = read_json(run / "run.json")
    return info if isinstance(info, dict) else {}  # a damaged file: no information


def _started(info: dict[str, Any]) -> float:
    started = info.get("started")
    return float(started) if isinstance(started, int | float) else 0.0


def summarize(run: Path, metrics: list[str]) -> dict[str, Any]:
    """Status, start time, last step and the last value of each requested metric.

    A run whose files cannot be read is listed with status ``unreadable (<reason>)``
    instead of stopping the listing of every other run.
    """
    try:
        return _summarize(run, metrics)
    except Exception as error:  # one damaged run folder must not hide the others
        row: dict[str, Any] = {
            "run": f"{run.parent.name}/{run.name}",
            "status": f"unreadable ({type(error).__name__}: {error})"[:80],
            "started": "",
            "epochs": 0,
        }
        row.update({name: math.nan for name in metrics})
        return row


def _summarize(run: Path, metrics: list[str]) -> dict[str, Any]:
    info = _info(run)
    series = metric_series(read_metrics(run), "epoch")
    started = _started(info)
    row: dict[str, Any] = {
        "run": f"{run.parent.name}/{run.name}",
        "status": info.get("status", "?"),
        "started": _dt.datetime.fromtimestamp(started).strftime("%Y-%m-%d %H:%M")
        if started
        else "",
        "epochs": max(series[next(iter(series))][0]) if series else 0,
    }
    for name in metrics:
        row[name] = series[name][1][-1] if name in series else math.nan
    return row


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def run(args: argparse.Namespace) -> int:
    """Print a table of runs; returns 1 when ``root`` does not exist."""
    root = Path(args.root)
    if not root.is_dir():
        print(f"No runs folder at {root}; pass the root given to Experiment(root=...).")
        return 1
    metrics = [m for m in args.metrics.split(",") if m]
    rows = [summarize(r, metrics) for r in find_runs(root, args.project)]
    if not rows:
        print(f"No runs under {root}.")
        return 0
    header = list(rows[0])
    table = [header] + [[_fmt(r[h]) for h in header] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    return 0
