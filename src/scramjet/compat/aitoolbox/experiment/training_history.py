"""``TrainingHistory``: the per-epoch metric lists of a ``TrainLoop`` run, keyed by name."""

from __future__ import annotations

import copy
import re
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
        self._epochs: dict[str, list[int | None]] = {}

    def insert_single_result_into_history(
        self, metric_name: str, metric_result: Any, epoch: int | None = None
    ) -> None:
        """Append ``metric_result`` to ``metric_name``'s list (created if new).

        Values are appended in order; ``epoch``, when given (the TrainLoop gives its own),
        is kept as the epoch the value belongs to (see :meth:`epochs_of`).
        """
        values = self.train_history.setdefault(metric_name, [])
        epochs = self.epochs_of(metric_name)
        values.append(metric_result)
        epochs.append(epoch)

    def epochs_of(self, metric_name: str) -> list[int | None]:
        """The epoch of each of ``metric_name``'s values, None where none was given (a
        value appended to the list directly, or a history from before epochs were kept)."""
        store = self.__dict__.setdefault("_epochs", {})
        values = self.train_history.get(metric_name, [])
        epochs: list[int | None] = store.setdefault(metric_name, [])
        if len(epochs) != len(values):  # the list was changed directly: epochs unknown
            epochs[:] = [None] * len(values)
        return epochs

    def wrap_pre_prepared_history(self, history: Mapping[str, list[Any]]) -> TrainingHistory:
        """Use ``history`` (e.g. a Keras ``History.history``) as this object's content."""
        self.train_history = dict(history)
        self._epochs = {}
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
        self.train_history, self._epochs = added.train_history, added.__dict__.get("_epochs", {})
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


#: Names (or ``_``/``-``/``.``/``/``-separated parts of names) of metrics where lower is better.
_ERROR_NAMES = frozenset({"mse", "mae", "rmse", "mape", "msle", "nll", "perplexity", "ppl"})


def lower_is_better(metric_name: str) -> bool:
    """Whether lower values of ``metric_name`` are better: AIToolbox's rule (the name
    contains ``loss`` or ``error``), and names such as ``val_mse`` or ``mae`` (the keys
    scramjet's regression package adds)."""
    name = metric_name.lower()
    if "loss" in name or "error" in name:
        return True
    return any(part in _ERROR_NAMES for part in re.split(r"[_\-./ ]+", name))
