"""``TrainingHistory``: the per-epoch metric lists of a ``TrainLoop`` run, keyed by name."""

from __future__ import annotations

import copy
import warnings
from collections.abc import ItemsView, Iterator, KeysView, Mapping
from typing import Any

__all__ = ["TrainingHistory"]


class TrainingHistory:
    """Metric name → list of values, one appended per epoch (or per evaluation).

    A new history holds ``loss`` (end-of-epoch train-set loss), ``accumulated_loss`` (the
    mean of the epoch's training batches) and, with validation, ``val_loss``. Values are
    appended with :meth:`insert_single_result_into_history` or ``history[name] = value``;
    ``history + {"name": value}`` returns a new history with the values appended.

    Args:
        has_validation: start with an empty ``val_loss`` list.
        strict_content_check: :meth:`qa_check_history_records` raises instead of warning.
    """

    def __init__(self, has_validation: bool = True, strict_content_check: bool = False) -> None:
        self.has_validation = has_validation
        self.strict_content_check = strict_content_check
        self.empty_train_history: dict[str, list[Any]] = {"loss": [], "accumulated_loss": []}
        if has_validation:
            self.empty_train_history["val_loss"] = []
        self.train_history: dict[str, list[Any]] = copy.deepcopy(self.empty_train_history)

    def insert_single_result_into_history(
        self, metric_name: str, metric_result: Any, epoch: int | None = None
    ) -> None:
        """Append ``metric_result`` to ``metric_name``'s list (created if new).

        ``epoch`` is accepted for compatibility: values are appended in order.
        """
        self.train_history.setdefault(metric_name, []).append(metric_result)

    def wrap_pre_prepared_history(self, history: Mapping[str, list[Any]]) -> TrainingHistory:
        """Use ``history`` (e.g. a Keras ``History.history``) as this object's content."""
        self.train_history = dict(history)
        return self

    def get_train_history(self) -> dict[str, list[Any]]:
        """The history as a plain dict."""
        return self.train_history

    def get_train_history_dict(self, flatten_dict: bool = False) -> dict[str, list[Any]]:
        """The history as a plain dict (``flatten_dict`` is accepted for compatibility)."""
        return self.train_history

    def qa_check_history_records(self) -> None:
        """Check that every non-empty metric has as many values as the others.

        Raises:
            ValueError: lengths differ and ``strict_content_check`` is set (else a warning).
        """
        lengths = {k: len(v) for k, v in self.train_history.items() if v}
        if len(set(lengths.values())) > 1:
            message = (
                f"the history's metrics have different numbers of values: {lengths}; expected "
                f"one value per epoch for every metric. Insert each metric once per epoch."
            )
            if self.strict_content_check:
                raise ValueError(message)

            warnings.warn(message, stacklevel=2)

    def _added(self, other: Any) -> TrainingHistory:
        if not isinstance(other, Mapping):
            raise TypeError(
                f"a TrainingHistory can be added a dict of metric name → value; received "
                f"{type(other).__name__}. Pass e.g. history + {{'accuracy': 0.9}}."
            )
        result = copy.deepcopy(self)
        for name, value in other.items():
            result.insert_single_result_into_history(name, value)
        return result

    def __add__(self, other: Any) -> TrainingHistory:
        return self._added(other)

    def __radd__(self, other: Any) -> TrainingHistory:
        return self._added(other)

    def __iadd__(self, other: Any) -> TrainingHistory:
        added = self._added(other)
        self.train_history = added.train_history
        return self

    def __str__(self) -> str:
        return str(self.train_history)

    def __len__(self) -> int:
        return len(self.train_history)

    def __getitem__(self, name: str) -> list[Any]:
        return self.train_history[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self.insert_single_result_into_history(name, value)

    def __contains__(self, name: object) -> bool:
        return name in self.train_history

    def __iter__(self) -> Iterator[str]:
        return iter(self.train_history)

    def get(self, name: str, default: Any = None) -> Any:
        """The values recorded for ``name``, or ``default`` when none were."""
        return self.train_history.get(name, default)

    def keys(self) -> KeysView[str]:
        """The metric names."""
        return self.train_history.keys()

    def items(self) -> ItemsView[str, list[Any]]:
        """``(name, values)`` pairs."""
        return self.train_history.items()
