"""The one small interface every tracker backend implements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict


class MetricRow(TypedDict):
    """One batch of metric values taken at the same point of training.

    ``scope`` is ``"step"`` (per optimizer update) or ``"epoch"``; ``step`` is the
    optimizer step and ``epoch`` the 1-based epoch the values belong to.
    """

    scope: str
    step: int
    epoch: int
    time: float
    metrics: dict[str, float]


class Tracker:
    """Base class of the metric loggers (CSV/JSONL, TensorBoard, MLflow).

    The :class:`~scramjet.tracking.Experiment` calls these methods on the main process
    only, with rows batched (every ``log_every_n_steps`` steps and at epoch ends), so a
    backend never runs per training step.
    """

    #: Short name used in ``Experiment(loggers=(...))``.
    name = "tracker"

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Record the run's hyperparameters (called once per training run)."""

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Record a batch of metric rows."""

    def truncate(self, step: int, epoch: int) -> None:
        """Forget rows logged after a checkpoint (``step`` / ``epoch``) that a resume restarts from."""

    def close(self) -> None:
        """Flush and release files or connections."""


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"opt": {"lr": 0.1}}`` → ``{"opt.lr": 0.1}``; non-scalar values become strings."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, f"{name}."))
        elif isinstance(value, bool | int | float | str) or value is None:
            flat[name] = value
        else:
            flat[name] = str(value)
    return flat
