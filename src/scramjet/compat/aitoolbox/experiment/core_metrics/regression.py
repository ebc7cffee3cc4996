"""AIToolbox's regression metrics."""

from __future__ import annotations

from typing import Any

import numpy as np

from scramjet.compat.aitoolbox.experiment.core_metrics.abstract_metric import AbstractBaseMetric

__all__ = ["MeanAbsoluteErrorMetric", "MeanSquaredErrorMetric"]


def _errors(y_true: np.ndarray, y_predicted: np.ndarray) -> np.ndarray:
    if y_true.size != y_predicted.size:
        raise ValueError(
            f"y_true has {y_true.size} values and y_predicted {y_predicted.size}; pass one "
            f"prediction per target."
        )
    diff: np.ndarray = y_predicted.reshape(-1).astype(float) - y_true.reshape(-1).astype(float)
    return diff


class MeanSquaredErrorMetric(AbstractBaseMetric):
    """Mean of squared errors."""

    def __init__(self, y_true: Any, y_predicted: Any) -> None:
        super().__init__(y_true, y_predicted, metric_name="Mean_squared_error")

    def calculate_metric(self) -> float:
        """``mean((y_pred - y_true) ** 2)``."""
        return float(np.mean(_errors(self.y_true, self.y_predicted) ** 2))


class MeanAbsoluteErrorMetric(AbstractBaseMetric):
    """Mean of absolute errors."""

    def __init__(self, y_true: Any, y_predicted: Any) -> None:
        super().__init__(y_true, y_predicted, metric_name="Mean_absolute_error")

    def calculate_metric(self) -> float:
        """``mean(|y_pred - y_true|)``."""
        return float(np.mean(np.abs(_errors(self.y_true, self.y_predicted))))
