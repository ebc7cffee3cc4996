"""Experiment tracking: run folders, metric loggers, cloud storage, reports.

- :class:`Experiment` — the Trainer callback that keeps a run folder.
- :class:`RunStorage` — background, verified mirroring to any fsspec URL;
  :class:`ProcessRunStorage` runs it in a separate process.
- :class:`Tracker` and the CSV/JSONL, TensorBoard, MLflow and W&B loggers, fed by
  ``trainer.log`` (:class:`MetricLog`) and the Experiment with the same metric names.
- :class:`StorageCheckError` — the remote store cannot be written (checked at the start).
- :func:`build_report` / :func:`compare_runs` — ``report.html`` and comparisons.
- :func:`list_runs` — the runs under a root as plain dicts, to filter and compare.

Names are imported on first use, so the upload process (which imports only the storage
module) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scramjet.tracking.cli_runs import list_runs
    from scramjet.tracking.experiment import Experiment
    from scramjet.tracking.loggers import CSVTracker, MetricRow, Tracker, read_metrics
    from scramjet.tracking.metric_log import MetricLog
    from scramjet.tracking.report import build_plots, build_report, compare_runs
    from scramjet.tracking.storage import RunStorage, StorageCheckError, UploadReport
    from scramjet.tracking.upload_process import ProcessRunStorage

_LAZY = {
    "CSVTracker": "scramjet.tracking.loggers",
    "Experiment": "scramjet.tracking.experiment",
    "MetricLog": "scramjet.tracking.metric_log",
    "MetricRow": "scramjet.tracking.loggers",
    "ProcessRunStorage": "scramjet.tracking.upload_process",
    "RunStorage": "scramjet.tracking.storage",
    "StorageCheckError": "scramjet.tracking.storage",
    "Tracker": "scramjet.tracking.loggers",
    "UploadReport": "scramjet.tracking.storage",
    "build_plots": "scramjet.tracking.report",
    "build_report": "scramjet.tracking.report",
    "compare_runs": "scramjet.tracking.report",
    "list_runs": "scramjet.tracking.cli_runs",
    "read_metrics": "scramjet.tracking.loggers",
}

__all__ = [
    "CSVTracker",
    "Experiment",
    "MetricLog",
    "MetricRow",
    "ProcessRunStorage",
    "RunStorage",
    "StorageCheckError",
    "Tracker",
    "UploadReport",
    "build_plots",
    "build_report",
    "compare_runs",
    "list_runs",
    "read_metrics",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scramjet.tracking' has no attribute {name!r}")
