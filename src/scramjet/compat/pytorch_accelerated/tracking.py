"""pytorch-accelerated's run history and loss tracking.

:class:`InMemoryRunHistory` is scramjet's :class:`~scramjet.trainer.RunHistory` (the one the
Trainer keeps by default). :class:`RunHistory` is the abstract interface for a history of
your own: implement its abstract methods; the rest (what the Trainer needs to follow
epochs and to save the history in checkpoints) has defaults built on them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from scramjet.trainer.state import RunHistory as _CoreRunHistory
from scramjet.trainer.state import TrainState


class RunHistory(ABC):
    """The interface of a run history (metric values per name, and the current epoch).

    The Trainer advances the epoch of a history of your own with ``_increment_epoch()``
    at the end of every training epoch.
    """

    @abstractmethod
    def get_metric_names(self) -> set[str]:
        """Names of the recorded metrics."""

    @abstractmethod
    def get_metric_values(self, metric_name: str) -> list[Any]:
        """Every value recorded for ``metric_name``."""

    @abstractmethod
    def get_latest_metric(self, metric_name: str) -> Any:
        """The last value recorded for ``metric_name`` (a ``ValueError`` if none)."""

    @abstractmethod
    def update_metric(self, metric_name: str, metric_value: Any) -> None:
        """Record a value."""

    @property
    @abstractmethod
    def current_epoch(self) -> int:
        """The current epoch, 1-based."""

    @abstractmethod
    def _increment_epoch(self) -> None:
        """Move to the next epoch."""

    @abstractmethod
    def reset(self) -> None:
        """Forget everything; back to epoch 1."""

    def follow(self, state: TrainState) -> None:
        """Called when a run starts; epochs are advanced with ``_increment_epoch`` instead.

        The run's counters and the epoch it starts at are noted, so that a run resumed
        from a checkpoint of it counts its epochs as the uninterrupted run does.
        """
        self._run_state = state
        self._run_first_epoch = self.current_epoch - state.epoch

    def state_dict(self) -> dict[str, Any]:
        """The recorded values and the epoch count, for checkpoints."""
        names = sorted(self.get_metric_names())
        saved: dict[str, Any] = {
            "metrics": {n: self.get_metric_values(n) for n in names},
            "epoch": self.current_epoch,
        }
        if getattr(self, "_run_state", None) is not None:
            saved["first_epoch"] = self._run_first_epoch
        return saved

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replay saved values into a reset history, then advance it to the saved epoch.

        In a resumed run, that is the epoch the run continues with (the epoch its saving
        run started at, plus the epochs the restored counters have done).
        """
        self.reset()
        for name, values in state.get("metrics", {}).items():
            for value in values:
                self.update_metric(name, value)
        run = getattr(self, "_run_state", None)
        if run is not None and "first_epoch" in state:
            self._run_first_epoch = int(state["first_epoch"])
            target = self._run_first_epoch + run.epoch
        else:
            target = int(state.get("epoch", self.current_epoch))
        while self.current_epoch < target:
            self._increment_epoch()


class InMemoryRunHistory(_CoreRunHistory):
    """The run history the Trainer keeps by default: metric values in memory."""

    def _set_epoch(self, epoch: int) -> None:
        self.current_epoch = epoch


RunHistory.register(InMemoryRunHistory)


class LossTracker:
    """A running mean of losses, weighted by batch size.

    Attributes:
        loss_value: the last loss given.
        total_loss: the sum of ``loss * batch_size``.
        running_count: the sum of batch sizes.
        average: ``total_loss / running_count``.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start again from nothing."""
        self.loss_value = 0.0
        self.average = 0.0
        self.total_loss = 0.0
        self.running_count = 0

    def update(self, loss_batch_value: float, batch_size: int = 1) -> None:
        """Add one batch's mean loss."""
        self.loss_value = float(loss_batch_value)
        self.total_loss += self.loss_value * batch_size
        self.running_count += batch_size
        self.average = self.total_loss / self.running_count


__all__ = ["InMemoryRunHistory", "LossTracker", "RunHistory"]
