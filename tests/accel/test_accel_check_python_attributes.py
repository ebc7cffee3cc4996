"""The first-call check runs the forward several times; Python attributes the forward
changes (a step counter, a running float) advance once per call, as without acceleration."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from scramjet.accel import accelerate_model, active_backend


class _Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.calls = 0
        self.inner = nn.Module()
        self.inner.seen = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.inner.seen = self.inner.seen + float(x.shape[0])
        return self.lin(x)


@pytest.mark.parametrize("backends", [["COMPILE"]])
def test_python_counters_advance_once_per_call(backends: list[str]) -> None:
    plain = _Counting()
    fast = accelerate_model(_Counting(), backends=backends)
    x = torch.randn(4, 3)
    for model in (plain, fast):
        for _ in range(3):
            model(x).sum().backward()
        model.eval()
        with torch.no_grad():
            model(x)
            model(x)
    assert active_backend(fast) == backends[0]
    assert (fast.calls, fast.inner.seen) == (plain.calls, plain.inner.seen) == (5, 20.0)
