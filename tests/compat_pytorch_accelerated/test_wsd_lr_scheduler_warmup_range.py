"""WSDLrScheduler's warm-up must fit the run: a longer one kept climbing past the end of
the run (the learning rate above the base value, never decayed), a negative one was
silently no warm-up."""

from __future__ import annotations

import math

import pytest
import torch

from scramjet.compat.pytorch_accelerated.schedulers import WSDLrScheduler
from scramjet.compat.pytorch_accelerated.schedulers.scheduler_base import SchedulerConfigError


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)


@pytest.mark.parametrize("warmup", [11, 20, -3])
def test_a_warmup_outside_the_run_is_refused(warmup: int) -> None:
    with pytest.raises(SchedulerConfigError, match="num_warmup_steps") as caught:
        WSDLrScheduler(_optimizer(), total_steps=10, num_warmup_steps=warmup)
    assert str(warmup) in str(caught.value) and "10" in str(caught.value)


@pytest.mark.parametrize("start", [math.nan, -1e-3, math.inf])
def test_a_warmup_start_that_is_not_a_learning_rate_is_refused(start: float) -> None:
    with pytest.raises(SchedulerConfigError, match="warmup_starting_lr"):
        WSDLrScheduler(_optimizer(), total_steps=10, num_warmup_steps=2, warmup_starting_lr=start)


def test_a_warmup_as_long_as_the_run_ends_at_the_floor() -> None:
    opt = _optimizer()
    sched = WSDLrScheduler(opt, total_steps=10, num_warmup_steps=10, lr_min=0.0)
    values = []
    for _ in range(14):
        sched.step()
        values.append(opt.param_groups[0]["lr"])
    assert max(values) <= 1.0, "never above the base learning rate"
    assert values[-1] == 0.0, "past the run: the floor"
