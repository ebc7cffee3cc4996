"""AIToolbox's metric base class: one metric computed once, from targets and predictions."""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

__all__ = ["AbstractBaseMetric"]


def _scalar(value: Any, what: str) -> float:
    if isinstance(value, AbstractBaseMetric):
        value = value.metric_result
    if isinstance(value, numbers.Real | np.number) and not isinstance(value, bool):
        return float(value)
    raise ValueError(
        f"only single-number metrics can be compared; {what} is {type(value).__name__} "
        f"{value!r}. Compare one of its entries instead, e.g. metric['name']."
    )


class AbstractBaseMetric(ABC):
    """A metric: subclasses implement :meth:`calculate_metric`, run on construction.

    Metrics holding one number compare with ``<``, ``<=``, ``>``, ``>=`` against other
    metrics or numbers; ``name in metric`` and ``metric[name]`` look up the metric's name
    or, for a dict result, its entries.

    Args:
        y_true: targets.
        y_predicted: predictions.
        metric_name: the key of :meth:`get_metric_dict`.
        np_array: convert both inputs to numpy arrays first.
    """

    def __init__(
        self, y_true: Any, y_predicted: Any, metric_name: str | None = None, np_array: bool = True
    ) -> None:
        self.y_true = np.array(y_true) if np_array else y_true
        self.y_predicted = np.array(y_predicted) if np_array else y_predicted
        self.metric_name = metric_name
        self.metric_result: Any = None
        self.metric_result = self.calculate_metric()

    @abstractmethod
    def calculate_metric(self) -> Any:
        """Compute the metric from ``self.y_true`` and ``self.y_predicted``."""

    def get_metric(self) -> Any:
        """The computed value."""
        return self.metric_result

    def get_metric_dict(self) -> dict[str, Any]:
        """``{metric_name: value}``."""
        return {str(self.metric_name): self.metric_result}

    def __str__(self) -> str:
        return f"{self.metric_name}: {self.metric_result}"

    def __len__(self) -> int:
        return len(self.metric_result) if isinstance(self.metric_result, dict | list) else 1

    def __lt__(self, other: Any) -> bool:
        return _scalar(self, "this metric") < _scalar(other, "the other side")

    def __le__(self, other: Any) -> bool:
        return _scalar(self, "this metric") <= _scalar(other, "the other side")

    def __gt__(self, other: Any) -> bool:
        return _scalar(self, "this metric") > _scalar(other, "the other side")

    def __ge__(self, other: Any) -> bool:
        return _scalar(self, "this metric") >= _scalar(other, "the other side")

    def __contains__(self, item: object) -> bool:
        if item == self.metric_name:
            return True
        return isinstance(self.metric_result, dict) and item in self.metric_result

    def __getitem__(self, item: str) -> Any:
        if item == self.metric_name:
            return self.metric_result
        if isinstance(self.metric_result, dict) and item in self.metric_result:
            return self.metric_result[item]
        raise KeyError(
            f"{item!r} is neither this metric's name ({self.metric_name!r}) nor one of its entries."
        )
