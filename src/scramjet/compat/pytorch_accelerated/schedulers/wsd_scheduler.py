"""Warmup–stable–decay with several checkpoint periods, and continuation from a checkpoint.

The run is cut into ``num_checkpoints`` periods whose ends grow geometrically (each period
ends at twice the step of the previous end, the last at ``total_steps``). Each period holds
the learning rate at its starting value, then spends its last ``decay_phase_ratio`` decaying
towards ``lr_min`` × that value; the next period starts again at the full value. Saving a
checkpoint just before a decay (``pre_decay_step``) gives a state from which a longer run
can continue; saving at a period's end gives a decayed model to evaluate.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from scramjet.compat.pytorch_accelerated.schedulers.scheduler_base import (
    SchedulerConfigError,
    StatefulSchedulerBase,
)
from scramjet.schedulers import TrainerPlaceholderValues

# Settings a continuation takes from the checkpoint it continues; the rest (the new run's
# length, the update count, the warm-up) belong to the new run.
_CONTINUED = ("decay_phase_ratio", "lr_min", "warmup_starting_lr", "use_inverse_sqrt_decay",
              "num_checkpoints")  # fmt: skip


class WSDLrScheduler(StatefulSchedulerBase):
    """Warmup–stable–decay learning rates over ``total_steps`` optimizer updates.

    Args:
        optimizer: the optimizer to schedule.
        num_epochs, num_update_steps_per_epoch: the run's length, when ``total_steps`` is
            not given (their product); pytorch-accelerated's first arguments.
        total_steps: optimizer updates in the run (> 0).
        num_warmup_steps: updates of linear warm-up from ``warmup_starting_lr`` (absolute);
            None means 1% of ``total_steps``. A continuation never warms up.
        decay_phase_ratio: the fraction of each period spent decaying, in (0, 1).
        lr_min: the floor, as a fraction of each group's starting learning rate.
        warmup_starting_lr: the first warm-up value.
        use_inverse_sqrt_decay: decay as ``lr_min + (1 - lr_min) * (1 - sqrt(t))`` (True)
            or inversely proportional, ``1 / (t / lr_min + 1 - t)`` (the paper's formula),
            for ``t`` from 0 to 1 through the decay; both end at ``lr_min``.
        num_checkpoints: how many periods (each ends with a decay).
        is_continuation_from_checkpoint: this run continues a checkpoint saved before a
            decay: call :meth:`load_state_dict` with that checkpoint's scheduler state.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        num_epochs: int | None = None,
        num_update_steps_per_epoch: int | None = None,
        total_steps: int | None = None,
        num_warmup_steps: int | None = 0,
        decay_phase_ratio: float = 0.1,
        lr_min: float = 1e-6,
        warmup_starting_lr: float = 1e-6,
        use_inverse_sqrt_decay: bool = True,
        num_checkpoints: int = 1,
        is_continuation_from_checkpoint: bool = False,
    ) -> None:
        total_steps = _total_steps(num_epochs, num_update_steps_per_epoch, total_steps)
        _check(total_steps, decay_phase_ratio, lr_min, num_checkpoints)
        super().__init__(optimizer)
        self.total_steps = int(total_steps)
        if is_continuation_from_checkpoint:
            num_warmup_steps = 0
        elif num_warmup_steps is None:
            num_warmup_steps = int(0.01 * total_steps)
        _check_warmup(num_warmup_steps, total_steps, warmup_starting_lr)
        self.num_warmup_steps = int(num_warmup_steps)
        self.decay_phase_ratio = float(decay_phase_ratio)
        self.lr_min = float(lr_min)
        self.warmup_starting_lr = float(warmup_starting_lr)
        self.use_inverse_sqrt_decay = bool(use_inverse_sqrt_decay)
        self.num_checkpoints = int(num_checkpoints)
        self.is_continuation_from_checkpoint = bool(is_continuation_from_checkpoint)
        self.previous_checkpoint_step: int | None = None
        self._get_checkpoint_info = functools.lru_cache(maxsize=4096)(self._checkpoint_info)
        if self.num_warmup_steps:  # the first update runs at the warm-up's first value
            self._set_values(self.get_updated_values(0))

    # -------------------------------------------------------------- periods
    def get_checkpoint_steps(self) -> list[int]:
        """The update count at which each period ends (the last is ``total_steps``)."""
        n = self.num_checkpoints
        steps = [int(self.total_steps / 2 ** (n - k)) for k in range(1, n + 1)]
        return sorted({max(1, s) for s in steps})

    def get_decay_info(self) -> list[dict[str, int]]:
        """Per period: ``period_start``, ``period_end``, ``decay_steps``, ``pre_decay_step``."""
        info, start = [], 0
        for end in self.get_checkpoint_steps():
            decay = int((end - start) * self.decay_phase_ratio)
            info.append(
                {"period_start": start, "period_end": end, "decay_steps": decay,
                 "pre_decay_step": end - decay}
            )  # fmt: skip
            start = end
        return info

    def _period(self, step: int) -> dict[str, int]:
        periods = self.get_decay_info()
        return next((p for p in periods if step < p["period_end"]), periods[-1])

    def _checkpoint_info(self, step: int) -> tuple[int, int]:
        """``(period length, updates into the period)`` for update ``step``."""
        period = self._period(step)
        return period["period_end"] - period["period_start"], step - period["period_start"]

    def get_phase_info(self) -> dict[str, int]:
        """The period of the current update (see :meth:`get_decay_info`)."""
        return dict(self._period(max(self.num_updates, 0)))

    def get_current_step(self) -> int:
        """The index of the last update stepped (-1 before the first ``step()``)."""
        return self.num_updates

    # -------------------------------------------------------------- values
    def get_updated_values(self, num_updates: int) -> list[float]:
        """Each group's learning rate for update ``num_updates``."""
        step = max(int(num_updates), 0)
        if step < self.num_warmup_steps:
            start = self.warmup_starting_lr
            return [start + (b - start) * step / self.num_warmup_steps for b in self.base_lr_values]
        if step >= self.total_steps:
            return [b * self.lr_min for b in self.base_lr_values]
        length, into = self._get_checkpoint_info(step)
        decay = int(length * self.decay_phase_ratio)
        if decay == 0 or into < length - decay:
            return [b * 1.0 for b in self.base_lr_values]
        progress = (into - (length - decay)) / decay
        if self.use_inverse_sqrt_decay:
            scale = 1.0 - (1.0 - self.lr_min) * math.sqrt(progress)
        elif self.lr_min > 0:  # the paper's inverse proportional decay, as the peer has it
            scale = 1.0 / (progress / self.lr_min + (1.0 - progress))
        else:  # its limit for a floor of 0
            scale = 1.0 if progress == 0 else 0.0
        return [b * scale for b in self.base_lr_values]

    def step(self) -> None:
        """Count one update, set its value, and remember the last period end passed."""
        super().step()
        ends = [s for s in self.get_checkpoint_steps() if s <= self.num_updates]
        self.previous_checkpoint_step = ends[-1] if ends else None

    # -------------------------------------------------------------- state
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a saved state; a continuation keeps its own length and update count."""
        if self.is_continuation_from_checkpoint:
            for key in _CONTINUED:
                if key in state_dict:
                    setattr(self, key, state_dict[key])
            self.previous_checkpoint_step = None
        else:
            super().load_state_dict(state_dict)
        self._get_checkpoint_info.cache_clear()

    @classmethod
    def create_scheduler_fn(
        cls,
        total_num_epochs: Any = TrainerPlaceholderValues.NUM_EPOCHS,
        num_update_steps_per_epoch: Any = TrainerPlaceholderValues.NUM_UPDATE_STEPS_PER_EPOCH,
        num_warmup_steps: Any = None,
        decay_phase_ratio: float = 0.1,
        lr_min: float = 1e-6,
        warmup_starting_lr: float = 1e-6,
        use_inverse_sqrt_decay: bool = True,
        num_checkpoints: int = 1,
        *,
        num_warmup_epochs: float | None = None,
        total_steps: Any = None,
    ) -> functools.partial[Any]:
        """A ``create_scheduler_fn`` for ``Trainer.train``, with pytorch-accelerated's
        arguments in its order: the run's length is filled in by the Trainer unless given
        (``total_steps``, or epochs times updates per epoch). ``num_warmup_steps=None``
        warms up for 1% of the run; ``num_warmup_epochs`` gives it in epochs instead."""
        if num_warmup_epochs is not None:
            num_warmup_steps = num_warmup_epochs * num_update_steps_per_epoch
        length: dict[str, Any] = (
            {"total_steps": total_steps}
            if total_steps is not None
            else {
                "num_epochs": total_num_epochs,
                "num_update_steps_per_epoch": num_update_steps_per_epoch,
            }
        )
        return functools.partial(
            cls,
            **length,
            num_warmup_steps=num_warmup_steps,
            decay_phase_ratio=decay_phase_ratio,
            lr_min=lr_min,
            warmup_starting_lr=warmup_starting_lr,
            use_inverse_sqrt_decay=use_inverse_sqrt_decay,
            num_checkpoints=num_checkpoints,
        )


def _total_steps(epochs: int | None, per_epoch: int | None, total: int | None) -> int:
    """The run's updates: ``total``, or ``epochs x per_epoch`` (not both, one of them)."""
    if total is not None and (epochs is not None or per_epoch is not None):
        raise SchedulerConfigError(
            f"give the run's length once: total_steps={total}, or num_epochs={epochs} and "
            f"num_update_steps_per_epoch={per_epoch}, not both."
        )
    if total is not None:
        return total
    if epochs is None or per_epoch is None:
        raise SchedulerConfigError(
            "WSDLrScheduler needs the run's length: total_steps=..., or num_epochs=... and "
            "num_update_steps_per_epoch=... (WSDLrScheduler.create_scheduler_fn() fills "
            "them in from the Trainer)."
        )
    return int(epochs * per_epoch)


def _check(total_steps: int, decay_phase_ratio: float, lr_min: float, num_checkpoints: int) -> None:
    if not total_steps > 0:
        raise SchedulerConfigError(f"total_steps must be > 0; received {total_steps}.")
    if not 0.0 < decay_phase_ratio < 1.0:
        raise SchedulerConfigError(
            f"decay_phase_ratio must be in (0, 1); received {decay_phase_ratio}."
        )
    if not 0.0 <= lr_min <= 1.0:
        raise SchedulerConfigError(
            f"lr_min is a fraction of each group's learning rate, in [0, 1]; received {lr_min}."
        )
    if num_checkpoints < 1:
        raise SchedulerConfigError(f"num_checkpoints must be ≥ 1; received {num_checkpoints}.")


def _check_warmup(num_warmup_steps: int, total_steps: int, warmup_starting_lr: float) -> None:
    """A warm-up inside the run, from a learning rate: a longer one would climb past the
    run's end (above the base value, never decayed), a negative one is no warm-up."""
    if not 0 <= num_warmup_steps <= total_steps:
        raise SchedulerConfigError(
            f"num_warmup_steps must be between 0 and total_steps ({total_steps}); received "
            f"{num_warmup_steps}. Lower it, or pass None for 1% of the run."
        )
    if not (math.isfinite(warmup_starting_lr) and warmup_starting_lr >= 0):
        raise SchedulerConfigError(
            f"warmup_starting_lr must be a finite learning rate ≥ 0 (the warm-up's first "
            f"value); received {warmup_starting_lr!r}. Pass e.g. warmup_starting_lr=1e-6."
        )


__all__ = ["WSDLrScheduler"]
