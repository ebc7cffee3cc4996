"""Experiment tracking: run folders, metric loggers, cloud storage, reports.

- :class:`Experiment` — the Trainer callback that keeps a run folder.
- :class:`RunStorage` — background, verified mirroring to any fsspec URL.
- :class:`Tracker` and the CSV/JSONL, TensorBoard and MLflow loggers.
- :func:`build_report` / :func:`compare_runs` — ``report.html`` and comparisons.
"""

from __future__ import annotations

from scramjet.tracking.experiment import Experiment
from scramjet.tracking.loggers import CSVTracker, MetricRow, Tracker, read_metrics
from scramjet.tracking.report import build_plots, build_report, compare_runs
from scramjet.tracking.storage import RunStorage, UploadReport

__all__ = [
    "CSVTracker",
    "Experiment",
    "MetricRow",
    "RunStorage",
    "Tracker",
    "UploadReport",
    "build_plots",
    "build_report",
    "compare_runs",
    "read_metrics",
]
