"""Metric loggers behind one :class:`Tracker` interface: CSV/JSONL, TensorBoard, MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def open_tracker(
    spec: str, run_dir: Path, project: str, info: dict[str, Any], tags: dict[str, str]
) -> tuple[Tracker, dict[str, str]]:
    """The logger named ``spec`` for a run folder, and the ids to keep in its ``run.json``.

    ``info`` is the run's ``run.json``: an MLflow or W&B run id found there (a resumed run)
    is continued. Each logger's package is imported only when it is asked for.
    """
    if spec == "tensorboard":
        from scramjet.tracking.loggers.tensorboard import TensorBoardTracker

        return TensorBoardTracker(run_dir), {}
    if spec == "mlflow":
        from scramjet.tracking.loggers.mlflow import MLflowTracker

        mlflow = MLflowTracker(
            run_dir, project, run_dir.name, run_id=info.get("mlflow_run_id"), tags=tags
        )
        return mlflow, {"mlflow_run_id": mlflow.run_id}
    if spec == "wandb":
        from scramjet.tracking.loggers.wandb import WandbTracker

        wandb = WandbTracker(run_dir, project, run_id=info.get("wandb_run_id"))
        return wandb, {"wandb_run_id": wandb.run_id}
    raise ValueError(
        f"Unknown logger {spec!r}; expected 'csv', 'tensorboard', 'mlflow', 'wandb' or a "
        f"Tracker instance."
    )
