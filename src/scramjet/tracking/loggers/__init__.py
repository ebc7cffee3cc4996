"""Metric loggers behind one :class:`Tracker` interface: CSV/JSONL, TensorBoard, MLflow."""

from __future__ import annotations

from scramjet.tracking.loggers.base import MetricRow, Tracker, flatten_params
from scramjet.tracking.loggers.csv import CSVTracker, metric_series, read_metrics

__all__ = [
    "CSVTracker",
    "MetricRow",
    "Tracker",
    "flatten_params",
    "metric_series",
    "read_metrics",
]
