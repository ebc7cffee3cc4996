"""Assigning a new model to ``AcceleratedModel.module``: the wrapper runs the new one."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from scramjet.accel import accelerate_model, active_backend


@pytest.mark.parametrize("backends", [["PYTORCH"], ["COMPILE"]])
def test_the_forward_runs_the_model_assigned_to_module(backends: list[str]) -> None:
    torch.manual_seed(0)
    fast = accelerate_model(nn.Linear(2, 1), backends=backends)
    x = torch.randn(3, 2)
    fast(x)  # the first model's backend is built and checked
    new = nn.Linear(2, 1)
    fast.module = new
    torch.testing.assert_close(fast(x), new(x), rtol=1e-5, atol=1e-6)
    fast(x).sum().backward()
    assert new.weight.grad is not None  # the parameters the optimizer sees are trained
    assert active_backend(fast) == backends[0]


def test_the_new_model_gets_the_wrappers_options() -> None:
    fast = accelerate_model(nn.Linear(2, 1), backends=["PYTORCH"], channels_last=True)
    new = nn.Conv2d(3, 4, 3)
    fast.module = new
    assert new.weight.is_contiguous(memory_format=torch.channels_last)


def test_assigning_something_else_than_a_model_says_what_to_pass() -> None:
    fast = accelerate_model(nn.Linear(2, 1), backends=["PYTORCH"])
    with pytest.raises(TypeError, match=r"nn\.Module; received function"):
        fast.module = lambda x: x
