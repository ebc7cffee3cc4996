"""A run history of the user's own, on pytorch-accelerated's abstract interface (tests)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from scramjet.compat.pytorch_accelerated.tracking import RunHistory


class DictHistory(RunHistory):
    """A run history of the user's own, built on the abstract interface."""

    def __init__(self) -> None:
        self.values: defaultdict[str, list[Any]] = defaultdict(list)
        self.epoch = 1

    def get_metric_names(self) -> set[str]:
        return set(self.values)

    def get_metric_values(self, metric_name: str) -> list[Any]:
        return list(self.values[metric_name])

    def get_latest_metric(self, metric_name: str) -> Any:
        if not self.values.get(metric_name):
            raise ValueError(metric_name)
        return self.values[metric_name][-1]

    def update_metric(self, metric_name: str, metric_value: Any) -> None:
        self.values[metric_name].append(metric_value)

    @property
    def current_epoch(self) -> int:
        return self.epoch

    def _increment_epoch(self) -> None:
        self.epoch += 1

    def reset(self) -> None:
        self.values.clear()
        self.epoch = 1
