"""Cosine decay per update, with optional linear warm-up and a cool-down at the floor."""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from typing import Any

import torch

from scramjet.compat.pytorch_accelerated.schedulers.scheduler_base import (
    SchedulerConfigError,
    StatefulSchedulerBase,
)
from scramjet.schedulers import TrainerPlaceholderValues


class CosineLrScheduler(StatefulSchedulerBase):
    """Linear warm-up, cosine decay to a floor, then ``num_cooldown_epochs`` at the floor.

    Every value is absolute (``lr_min``, ``warmup_starting_lr``) unless its ratio form is
    given (``min_lr_ratio``, ``warmup_starting_lr_ratio``: a fraction of each group's
    starting learning rate). The decay spans the epochs left after warm-up and cool-down.

    Args:
        optimizer: the optimizer to schedule.
        total_num_epochs: epochs in the run.
        num_update_steps_per_epoch: optimizer updates per epoch.
        k_decay: shape of the decay (1 is the plain cosine; > 1 stays high longer).
        lr_min: the floor (absolute), used when ``min_lr_ratio`` is None.
        min_lr_ratio: the floor as a fraction of each group's starting value.
        num_warmup_epochs: epochs of linear warm-up.
        warmup_starting_lr: warm-up's first value (absolute).
        warmup_starting_lr_ratio: warm-up's first value as a fraction of each group's.
        num_cooldown_epochs: epochs held at the floor at the end.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        total_num_epochs: int,
        num_update_steps_per_epoch: int,
        k_decay: float = 1.0,
        lr_min: float = 1e-6,
        min_lr_ratio: float | None = None,
        num_warmup_epochs: int = 0,
        warmup_starting_lr: float = 1e-6,
        warmup_starting_lr_ratio: float | None = None,
        num_cooldown_epochs: int = 0,
    ) -> None:
        _check_settings(
            total_num_epochs=total_num_epochs, k_decay=k_decay, num_warmup_epochs=num_warmup_epochs,
            num_cooldown_epochs=num_cooldown_epochs, lr_min=lr_min, min_lr_ratio=min_lr_ratio,
            warmup_starting_lr=warmup_starting_lr, warmup_starting_lr_ratio=warmup_starting_lr_ratio,
        )  # fmt: skip
        super().__init__(optimizer)
        if num_warmup_epochs + num_cooldown_epochs > total_num_epochs:
            raise SchedulerConfigError(
                f"num_warmup_epochs ({num_warmup_epochs}) + num_cooldown_epochs "
                f"({num_cooldown_epochs}) exceed total_num_epochs ({total_num_epochs}); "
                f"lower one of them."
            )
        if num_update_steps_per_epoch < 1:
            raise SchedulerConfigError(
                f"num_update_steps_per_epoch must be ≥ 1; received {num_update_steps_per_epoch}."
            )
        self.k_decay = k_decay
        self.num_warmup_steps = num_warmup_epochs * num_update_steps_per_epoch
        self.num_cooldown_steps = num_cooldown_epochs * num_update_steps_per_epoch
        total = total_num_epochs * num_update_steps_per_epoch
        self.num_decay_steps = total - self.num_warmup_steps - self.num_cooldown_steps
        bases = self.base_lr_values
        self.lr_mins = [lr_min if min_lr_ratio is None else min_lr_ratio * b for b in bases]
        self.warmup_starting_lrs = [
            warmup_starting_lr if warmup_starting_lr_ratio is None else warmup_starting_lr_ratio * b
            for b in bases
        ]
        if self.num_warmup_steps:  # the first update runs at the warm-up's first value
            self._set_values(self.warmup_starting_lrs)

    def get_updated_values(self, num_updates: int) -> list[float]:
        """Each group's learning rate after ``num_updates`` updates."""
        out = []
        for base, floor, start in zip(self.base_lr_values, self.lr_mins, self.warmup_starting_lrs):
            if num_updates < self.num_warmup_steps:
                out.append(start + (base - start) * num_updates / self.num_warmup_steps)
                continue
            t = num_updates - self.num_warmup_steps
            if t >= self.num_decay_steps:
                out.append(floor)
                continue
            progress = (t / self.num_decay_steps) ** self.k_decay
            out.append(base - (base - floor) * 0.5 * (1.0 - math.cos(math.pi * progress)))
        return out

    @classmethod
    def create_scheduler_fn(
        cls,
        total_num_epochs: Any = TrainerPlaceholderValues.NUM_EPOCHS,
        num_update_steps_per_epoch: Any = TrainerPlaceholderValues.NUM_UPDATE_STEPS_PER_EPOCH,
        k_decay: float = 1.0,
        lr_min: float = 1e-6,
        min_lr_ratio: float | None = None,
        num_warmup_epochs: int = 0,
        warmup_starting_lr: float = 1e-6,
        warmup_starting_lr_ratio: float | None = None,
        num_cooldown_epochs: int = 0,
    ) -> functools.partial[Any]:
        """A ``create_scheduler_fn`` for ``Trainer.train``, with pytorch-accelerated's
        arguments in its order: the run's lengths are filled in by the Trainer unless given
        (placeholders stand in for ints until resolved)."""
        kwargs: dict[str, Any] = dict(
            total_num_epochs=total_num_epochs,
            num_update_steps_per_epoch=num_update_steps_per_epoch,
            k_decay=k_decay,
            lr_min=lr_min,
            min_lr_ratio=min_lr_ratio,
            num_warmup_epochs=num_warmup_epochs,
            warmup_starting_lr=warmup_starting_lr,
            warmup_starting_lr_ratio=warmup_starting_lr_ratio,
            num_cooldown_epochs=num_cooldown_epochs,
        )
        return functools.partial(cls, **kwargs)


# What each setting must be, and why: a value outside it gives no error, only a schedule
# that is not the one asked for (the floor from the first update for k_decay <= 0, NaN
# learning rates, a decay longer than the run) or a ZeroDivisionError from step().
_RULES: dict[str, tuple[str, Callable[[float], bool]]] = {
    "total_num_epochs": ("a number ≥ 1", lambda v: v >= 1),
    "k_decay": ("a number > 0 (1 is the plain cosine)", lambda v: v > 0),
    "num_warmup_epochs": ("a number ≥ 0 (0: no warm-up)", lambda v: v >= 0),
    "num_cooldown_epochs": ("a number ≥ 0 (0: no cool-down)", lambda v: v >= 0),
    "lr_min": ("a learning rate ≥ 0", lambda v: v >= 0),
    "min_lr_ratio": ("None or a fraction ≥ 0 of each group's learning rate", lambda v: v >= 0),
    "warmup_starting_lr": ("a learning rate ≥ 0", lambda v: v >= 0),
    "warmup_starting_lr_ratio": (
        "None or a fraction ≥ 0 of each group's learning rate",
        lambda v: v >= 0,
    ),
}


def _check_settings(**settings: float | None) -> None:
    """Every setting a finite number within its rule (a ratio may be None)."""
    for name, value in settings.items():
        if value is None and name.endswith("_ratio"):
            continue
        expected, rule = _RULES[name]
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not (number and value is not None and math.isfinite(value) and rule(value)):
            raise SchedulerConfigError(
                f"CosineLrScheduler: {name} must be {expected}; received {value!r}. Pass a "
                f"value in that range (see the class docstring for what each setting means)."
            )


__all__ = ["CosineLrScheduler"]
