"""Warm-up learning-rate schedules as callbacks, stepped after every training batch.

Each multiplies the optimizer's initial learning rate by a factor of the step: during
the first ``num_warmup_steps`` it rises linearly from 0 to 1; afterwards it stays at 1
(constant), falls linearly to 0 at ``num_training_steps`` (linear), or follows a cosine
(with optional hard restarts). ``last_epoch`` resumes the schedule at that step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from torch.optim import lr_scheduler

from scramjet.compat.aitoolbox.torchtrain.schedulers.basic import (
    BatchUpdateGeneralLRSchedulerCallback,
)

__all__ = [
    "ConstantWithWarmupScheduler",
    "CosineWithWarmupScheduler",
    "HardRestartsCosineWithWarmupScheduler",
    "LinearWithWarmupScheduler",
]


def _check_steps(num_warmup_steps: int, num_training_steps: int | None = None) -> None:
    if num_warmup_steps < 0:
        raise ValueError(f"num_warmup_steps must be ≥ 0; received {num_warmup_steps}.")
    if num_training_steps is not None and num_training_steps < num_warmup_steps:
        raise ValueError(
            f"num_training_steps ({num_training_steps}) must be ≥ num_warmup_steps "
            f"({num_warmup_steps}): the warm-up is part of training."
        )


def _warmup(step: int, num_warmup_steps: int) -> float | None:
    """The warm-up factor, or None once the warm-up is over."""
    return step / max(1, num_warmup_steps) if step < num_warmup_steps else None


def _progress(step: int, num_warmup_steps: int, num_training_steps: int) -> float:
    """Share of the post-warm-up steps done (0 → 1)."""
    return (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)


class _LambdaWarmup(BatchUpdateGeneralLRSchedulerCallback):
    def __init__(self, factor: Callable[[int], float], last_epoch: int, **kwargs: Any) -> None:
        super().__init__(lr_scheduler.LambdaLR, lr_lambda=factor, last_epoch=last_epoch, **kwargs)


class ConstantWithWarmupScheduler(_LambdaWarmup):
    """Linear warm-up over ``num_warmup_steps``, then the initial learning rate."""

    def __init__(self, num_warmup_steps: int, last_epoch: int = -1, **kwargs: Any) -> None:
        _check_steps(num_warmup_steps)

        def factor(step: int) -> float:
            warm = _warmup(step, num_warmup_steps)
            return 1.0 if warm is None else warm

        super().__init__(factor, last_epoch, **kwargs)


class LinearWithWarmupScheduler(_LambdaWarmup):
    """Linear warm-up, then a linear decay to 0 at ``num_training_steps``."""

    def __init__(
        self, num_warmup_steps: int, num_training_steps: int, last_epoch: int = -1, **kwargs: Any
    ) -> None:
        _check_steps(num_warmup_steps, num_training_steps)

        def factor(step: int) -> float:
            warm = _warmup(step, num_warmup_steps)
            if warm is not None:
                return warm
            return max(
                0.0, (num_training_steps - step) / max(1, num_training_steps - num_warmup_steps)
            )

        super().__init__(factor, last_epoch, **kwargs)


class CosineWithWarmupScheduler(_LambdaWarmup):
    """Linear warm-up, then a cosine from 1 down over ``num_cycles`` periods (0.5: to 0 once)."""

    def __init__(
        self,
        num_warmup_steps: int,
        num_training_steps: int,
        num_cycles: float = 0.5,
        last_epoch: int = -1,
        **kwargs: Any,
    ) -> None:
        _check_steps(num_warmup_steps, num_training_steps)

        def factor(step: int) -> float:
            warm = _warmup(step, num_warmup_steps)
            if warm is not None:
                return warm
            done = _progress(step, num_warmup_steps, num_training_steps)
            return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 2.0 * num_cycles * done)))

        super().__init__(factor, last_epoch, **kwargs)


class HardRestartsCosineWithWarmupScheduler(_LambdaWarmup):
    """Linear warm-up, then ``num_cycles`` cosine decays from 1 to 0, each restarting at 1."""

    def __init__(
        self,
        num_warmup_steps: int,
        num_training_steps: int,
        num_cycles: float = 1.0,
        last_epoch: int = -1,
        **kwargs: Any,
    ) -> None:
        _check_steps(num_warmup_steps, num_training_steps)

        def factor(step: int) -> float:
            warm = _warmup(step, num_warmup_steps)
            if warm is not None:
                return warm
            done = _progress(step, num_warmup_steps, num_training_steps)
            if done >= 1.0:
                return 0.0
            return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((num_cycles * done) % 1.0))))

        super().__init__(factor, last_epoch, **kwargs)
