"""Run settings (frozen), the mutable loop state, and the run history.

``RunConfig`` is fixed for one ``train()`` call. ``TrainState`` is what changes every step
and what a checkpoint must carry to resume exactly. ``RunHistory`` records metric values,
one per epoch for ``*_epoch`` metrics.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunConfig:
    """Settings of one training (or evaluation) run, fixed when it starts."""

    num_epochs: int
    train_per_device_batch_size: int
    eval_per_device_batch_size: int
    num_update_steps_per_epoch: int
    max_num_train_steps: int | None
    gradient_accumulation_steps: int
    gradient_clip_value: float | None
    gradient_clip_norm: float | None
    precision: str
    num_processes: int
    is_local_process_zero: bool
    is_world_process_zero: bool
    device: str

    @property
    def total_update_steps(self) -> int:
        """Optimizer updates in the whole run (``max_num_train_steps`` when given).

        For a dataset without a length it is ``max_num_train_steps``, or 0 if that is not
        given either (unknown).
        """
        total = self.num_epochs * self.num_update_steps_per_epoch
        if self.max_num_train_steps:
            return min(total, self.max_num_train_steps) if total else self.max_num_train_steps
        return total

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict view, for logging and hyperparameter files."""
        return asdict(self)


@dataclass
class TrainState:
    """The loop's counters: enough, with the model and optimizer, to resume exactly.

    Attributes:
        global_step: optimizer updates done so far in the run.
        epoch: index of the current (or next) epoch, 0-based.
        batches_seen_in_epoch: micro-batches consumed in the current epoch; a resumed run
            skips this many batches of the sampler order without running them.
        samples_seen: training samples processed in the run (this process).
    """

    global_step: int = 0
    epoch: int = 0
    batches_seen_in_epoch: int = 0
    samples_seen: int = 0
    stop_requested: bool = False

    def state_dict(self) -> dict[str, Any]:
        """Counters as a plain dict."""
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore counters saved by :meth:`state_dict`."""
        for key, value in state.items():
            if hasattr(self, key):
                setattr(self, key, value)


@dataclass
class RunHistory:
    """Metric values recorded during training, in the order they were recorded.

    Example:
        >>> history = RunHistory()
        >>> history.update_metric("train_loss_epoch", 0.5)
        >>> history.get_latest_metric("train_loss_epoch")
        0.5
    """

    _metrics: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    current_epoch: int = 1

    def get_metric_names(self) -> set[str]:
        """Names of all recorded metrics."""
        return set(self._metrics)

    def get_metric_values(self, metric_name: str) -> list[Any]:
        """All values recorded for ``metric_name`` (empty if none)."""
        return list(self._metrics.get(metric_name, []))

    def get_latest_metric(self, metric_name: str) -> Any:
        """The most recent value of ``metric_name``.

        Raises:
            KeyError: no value was recorded under that name; the message lists the names.
        """
        values = self._metrics.get(metric_name)
        if not values:
            raise KeyError(
                f"No values recorded for metric {metric_name!r}; recorded metrics: "
                f"{sorted(self._metrics) or 'none yet'}."
            )
        return values[-1]

    def update_metric(self, metric_name: str, metric_value: Any) -> None:
        """Append a value (tensors are converted to Python numbers)."""
        if hasattr(metric_value, "item") and getattr(metric_value, "numel", lambda: 1)() == 1:
            metric_value = metric_value.item()
        self._metrics[metric_name].append(metric_value)

    def _increment_epoch(self) -> None:
        self.current_epoch += 1

    def reset(self) -> None:
        """Forget every metric and start again at epoch 1."""
        self._metrics = defaultdict(list)
        self.current_epoch = 1

    def state_dict(self) -> dict[str, Any]:
        """Everything recorded, as plain Python values."""
        return {
            "metrics": {k: list(v) for k, v in self._metrics.items()},
            "epoch": self.current_epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self._metrics = defaultdict(list, {k: list(v) for k, v in state["metrics"].items()})
        self.current_epoch = int(state["epoch"])


class MeanAccumulator:
    """Per-sample running mean: ``add(batch_mean, n)`` weighs each batch by its size."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def add(self, value: float, n: int) -> None:
        """Add a batch whose mean is ``value`` over ``n`` samples."""
        self.total += value * n
        self.count += n

    @property
    def mean(self) -> float:
        """Mean per sample (NaN when nothing was added)."""
        return self.total / self.count if self.count else math.nan
