"""WSDScheduler's decay length: ``decay_fraction`` of the run, rounded to the nearest update
with halves rounded up, so that it grows evenly with the run and never by more than one."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

from scramjet.schedulers import WSDScheduler


def _decay_updates(
    total_steps: int, decay_fraction: float, warmup_steps: int = 0, *, run: bool = True
) -> int:
    """The scheduler's decay length, checked (``run``) against the learning rates it sets:
    the steps after warm-up, up to ``total_steps`` included, that are below the plateau."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = WSDScheduler(
        opt, total_steps=total_steps, warmup_steps=warmup_steps, decay_fraction=decay_fraction
    )
    if not run:
        return sched.decay_steps
    lrs = []
    for _ in range(total_steps + 1):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    below = [lr for lr in lrs[warmup_steps:] if lr < 1.0 - 1e-9]
    assert sched.decay_steps == len(below)
    return sched.decay_steps


@pytest.mark.parametrize("decay_fraction", [0.1, 0.25, 0.3, 0.5, 0.7])
def test_decay_length_follows_the_fraction_over_many_run_lengths(decay_fraction: float) -> None:
    previous = 0
    for total in range(1, 121):
        decay = _decay_updates(total, decay_fraction, run=total % 10 == 5)
        exact = Fraction(str(decay_fraction)) * total
        assert decay == math.floor(exact + Fraction(1, 2)), (total, decay, exact)
        assert 0 <= decay - previous <= 1, "the decay grows by at most one update per update"
        previous = decay


def test_half_updates_round_up_not_to_even() -> None:
    # 0.5 x 5 = 2.5 and 0.5 x 7 = 3.5: both round up, as 2.5 -> 3 and 3.5 -> 4.
    assert _decay_updates(5, 0.5) == 3
    assert _decay_updates(7, 0.5) == 4
    assert _decay_updates(25, 0.1) == 3  # 2.5


def test_phases_add_up_to_the_run() -> None:
    for total in range(4, 60, 3):
        warmup = total // 4
        decay = _decay_updates(total, 0.3, warmup_steps=warmup)
        stable = total - warmup - decay
        assert stable >= 0 and warmup + stable + decay == total
