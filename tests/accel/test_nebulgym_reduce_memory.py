"""nebulgym's ``reduce_memory`` argument of ``@accelerate_model`` is accepted.

nebulgym's signature is ``accelerate_model(patch_backprop=True, reduce_memory=False,
**nebulgym_kwargs)``: its second positional parameter is ``reduce_memory`` (Gist: 8-bit
activations kept for backward), and ``backends`` came by keyword.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import scramjet.compat.nebulgym as ng
from scramjet.accel import AccelerationWarning


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
        self.head = torch.nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _grads(cls: type[torch.nn.Module]) -> list[torch.Tensor]:
    torch.manual_seed(0)
    net = cls()
    net(torch.randn(4, 8)).square().sum().backward()
    return [p.grad.clone() for p in net.parameters() if p.grad is not None]


@pytest.mark.parametrize("decorator", [ng.accelerate_model, ng.patch_torch_module])
def test_reduce_memory_false_by_position_is_accepted_silently(decorator) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccelerationWarning)
        decorated = decorator(False, False)(_Net)
        got = _grads(decorated)
    for g, want in zip(got, _grads(_Net), strict=True):
        torch.testing.assert_close(g, want, rtol=0, atol=0)


def test_reduce_memory_true_by_position_warns_once_and_trains_exactly() -> None:
    with pytest.warns(AccelerationWarning, match="reduce_memory=True") as caught:
        decorated = ng.accelerate_model(False, True)(_Net)
    assert len([w for w in caught if w.category is AccelerationWarning]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccelerationWarning)
        got = _grads(decorated)
    for g, want in zip(got, _grads(_Net), strict=True):
        torch.testing.assert_close(g, want, rtol=0, atol=0)


def test_reduce_memory_by_keyword_is_accepted() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccelerationWarning)
        decorated = ng.accelerate_model(reduce_memory=False, backends=["PYTORCH"])(_Net)
    assert _grads(decorated)


def test_reduce_memory_true_by_keyword_warns_and_trains_exactly() -> None:
    with pytest.warns(AccelerationWarning, match="Gist"):
        decorated = ng.patch_torch_module(reduce_memory=True, backends=["PYTORCH"])(_Net)
    assert _grads(decorated)
