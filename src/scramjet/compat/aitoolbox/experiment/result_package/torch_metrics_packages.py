"""AIToolbox's package around one torchmetrics metric object."""

from __future__ import annotations

from typing import Any

import torch

from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
)

__all__ = ["TorchMetricsPackage"]


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, torch.Tensor) and value.numel() == 1 else value


class TorchMetricsPackage(AbstractResultPackage):
    """Results of a torchmetrics ``Metric`` called on ``(y_predicted, y_true)``.

    A scalar result is named ``<MetricClass>_PTLMetrics``; a dict result keeps its keys,
    each with the ``_PTLMetrics`` suffix.

    Args:
        torch_metrics: a ``torchmetrics.Metric`` (or an object with ``__call__``,
            ``compute``, ``reset`` and ``to``).
    """

    def __init__(
        self, torch_metrics: Any, strict_content_check: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(
            f"{type(torch_metrics).__name__}_PTLMetrics", strict_content_check, np_array=False
        )
        self.metric = torch_metrics

    def prepare_results_dict(self) -> dict[str, Any]:
        """The metric's value(s) on the stored predictions and targets."""
        value = self.metric(self.y_predicted, self.y_true)
        if isinstance(value, dict):
            return {f"{name}_PTLMetrics": _plain(v) for name, v in value.items()}
        return {f"{type(self.metric).__name__}_PTLMetrics": _plain(value)}

    def metric_compute(self) -> Any:
        """The metric's value over everything it has seen (``metric.compute()``)."""
        return self.metric.compute()

    def metric_reset(self) -> None:
        """Clear the metric's accumulated state."""
        self.metric.reset()

    def to(self, device: Any) -> TorchMetricsPackage:
        """Move the metric's state to ``device``."""
        self.metric.to(device)
        return self
