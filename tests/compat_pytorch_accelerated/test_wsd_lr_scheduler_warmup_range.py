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


@pytest.mark.parametrize("lr_min", [0.01, 0.0])
def test_the_non_sqrt_decay_is_the_papers_inverse_proportional_one(lr_min: float) -> None:
    # pytorch-accelerated's use_inverse_sqrt_decay=False: lr = base / (t / lr_min + 1 - t)
    # over the decay (it was a straight line here: 0.901 where the peer gives 0.0917)
    opt = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=2.0)
    scheduler = WSDLrScheduler(opt, total_steps=100, num_warmup_steps=0, decay_phase_ratio=0.1,
                               lr_min=lr_min, use_inverse_sqrt_decay=False)  # fmt: skip
    got = []
    for _ in range(100):
        scheduler.step()
        got.append(opt.param_groups[0]["lr"])
    for step in range(90, 100):
        t = (step - 90) / 10
        want = 2.0 / (t / lr_min + 1 - t) if lr_min else (2.0 if t == 0 else 0.0)
        assert got[step] == pytest.approx(want, rel=1e-12), step
    assert got[:90] == [2.0] * 90


def test_a_warmup_starts_at_its_first_value_from_the_first_update() -> None:
    # Construction sets the warm-up's first value, as CosineLrScheduler does: the first
    # update of a run ran at the full base rate, the warm-up's purpose undone.
    opt = _optimizer()
    WSDLrScheduler(opt, total_steps=100, num_warmup_steps=10, warmup_starting_lr=1e-3)
    assert opt.param_groups[0]["lr"] == 1e-3
    plain = _optimizer()
    WSDLrScheduler(plain, total_steps=100, num_warmup_steps=0)
    assert plain.param_groups[0]["lr"] == 1.0
