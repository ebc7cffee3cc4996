"""pytorch-accelerated's scheduler base classes: a value per parameter group, set each update.

:class:`SchedulerBase` remembers each parameter group's starting value (``initial_lr``)
and sets the value :meth:`SchedulerBase.get_updated_values` computes for an update count;
:class:`StatefulSchedulerBase` counts the updates itself, so ``step()`` takes no argument
and the Trainer can call it once per optimizer update (and save it in checkpoints).

Construction sets each group's value to its starting value (a second scheduler on the same
optimizer starts where the first one started, not where it ended; a warm-up starts at its
first value); each ``step()`` sets the value for the update count it reaches (the first
``step()`` sets update 0's).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import torch


class SchedulerConfigError(ValueError, AssertionError):
    """A scheduler received an invalid setting.

    A ``ValueError`` with the fix in its message; also an ``AssertionError``, which is what
    pytorch-accelerated raised for the same settings.
    """


class SchedulerBase(ABC):
    """Sets ``param_group_field`` of every parameter group from :meth:`get_updated_values`.

    Args:
        optimizer: the optimizer whose parameter groups are scheduled.
        param_group_field: the parameter group entry to set (``"lr"`` by default).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, param_group_field: str = "lr") -> None:
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"optimizer must be a torch.optim.Optimizer; received {type(optimizer).__name__}."
            )
        self.optimizer = optimizer
        self.param_group_field = param_group_field
        self._initial_field = f"initial_{param_group_field}"
        for i, group in enumerate(optimizer.param_groups):
            if param_group_field not in group:
                raise KeyError(
                    f"parameter group {i} has no {param_group_field!r}; schedule a field the "
                    f"optimizer has (e.g. 'lr')."
                )
            group.setdefault(self._initial_field, group[param_group_field])
        self.base_lr_values = [g[self._initial_field] for g in optimizer.param_groups]
        self._set_values(self.base_lr_values)

    @abstractmethod
    def get_updated_values(self, num_updates: int) -> Any:
        """The value(s) after ``num_updates`` updates: one number, or one per group."""

    def step_update(self, num_updates: int) -> None:
        """Set every parameter group's value for ``num_updates`` updates."""
        values = self.get_updated_values(num_updates)
        if values is not None:
            self._set_values(values)

    def _set_values(self, values: Any) -> None:
        """Set one value in every parameter group, or one value per group."""
        if not isinstance(values, Sequence):
            values = [values] * len(self.optimizer.param_groups)
        for group, value in zip(self.optimizer.param_groups, values):
            group[self.param_group_field] = value


class StatefulSchedulerBase(SchedulerBase, ABC):
    """A :class:`SchedulerBase` that counts its updates: ``step()`` once per optimizer update.

    ``num_updates`` starts at -1; the first ``step()`` sets the value for update 0. The
    default :meth:`state_dict` holds every attribute except the optimizer.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, param_group_field: str = "lr") -> None:
        super().__init__(optimizer, param_group_field)
        self.num_updates = -1

    def step(self) -> None:
        """Count one update and set its value."""
        self.num_updates += 1
        self.step_update(self.num_updates)

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer (and caches)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.__dict__.update(state_dict)


__all__ = ["SchedulerBase", "SchedulerConfigError", "StatefulSchedulerBase"]
