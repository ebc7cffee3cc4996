"""CosineLrScheduler refuses settings that would give a run a meaningless schedule (the
whole run at the floor, NaN learning rates, a longer decay than the run), at construction
and with a message that names the setting, instead of a silent schedule or a
ZeroDivisionError from the first step()."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from scramjet.compat.pytorch_accelerated.schedulers import CosineLrScheduler
from scramjet.compat.pytorch_accelerated.schedulers.scheduler_base import SchedulerConfigError


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)


def _build(**overrides: Any) -> CosineLrScheduler:
    kwargs: dict[str, Any] = {"total_num_epochs": 4, "num_update_steps_per_epoch": 3}
    kwargs.update(overrides)
    return CosineLrScheduler(_optimizer(), **kwargs)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("k_decay", 0.0),  # (t/T)**0 == 1: the floor from the first update
        ("k_decay", -1.0),  # ZeroDivisionError at the first step()
        ("k_decay", math.nan),
        ("num_warmup_epochs", -1),  # the decay silently lengthened by the missing epoch
        ("num_cooldown_epochs", -2),  # the decay runs past the end of the run
        ("total_num_epochs", 0),
        ("lr_min", math.nan),
        ("lr_min", -1e-3),
        ("min_lr_ratio", math.nan),
        ("warmup_starting_lr", math.inf),
        ("warmup_starting_lr_ratio", -0.5),
    ],
)
def test_a_meaningless_setting_is_refused_with_its_name(setting: str, value: float) -> None:
    overrides: dict[str, Any] = {setting: value}
    if setting.startswith("warmup_starting"):
        overrides["num_warmup_epochs"] = 1
    with pytest.raises(SchedulerConfigError, match=setting) as caught:
        _build(**overrides)
    assert repr(value) in str(caught.value), "the message says what was received"


def test_valid_edge_settings_are_still_accepted() -> None:
    # Warm-up and cool-down filling the run (no decay), fractional warm-up epochs, a floor
    # of zero and k_decay below one (a faster start of the decay) stay allowed.
    _build(num_warmup_epochs=2, num_cooldown_epochs=2)
    _build(num_warmup_epochs=0.5, lr_min=0.0, k_decay=0.5)
    sched = _build(min_lr_ratio=0.0, warmup_starting_lr_ratio=0.0, num_warmup_epochs=1)
    values = []
    for _ in range(12):
        sched.step()
        values.append(sched.optimizer.param_groups[0]["lr"])
    assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in values)
