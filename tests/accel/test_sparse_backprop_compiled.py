"""Sparse backprop under COMPILE: the compiled model keeps the top-k backward that the
eager check step chose (COMPILE was dropped at its check, every time: the check's
restore of the layers' attributes undid the heads' choice, and the compiled graph traced
the dense backward), and a patched model compiled by the user after an eager step keeps it
too (Dynamo's trace read as a torch.func transform, which takes the dense backward)."""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from scramjet.accel import accelerate_model, active_backend, engine_of
from scramjet.accel.sparse_backprop import SparseBackpropConfig, apply_sparse_backprop


def _net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64)
    )


def _train(model: nn.Module, steps: int = 3) -> list[torch.Tensor]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    grads = []
    for _ in range(steps):
        x, y = torch.randn(16, 8, generator=gen), torch.randint(0, 64, (16,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
    return grads


def test_compile_keeps_the_sparse_backward_chosen_by_the_eager_step() -> None:
    eager = accelerate_model(_net(), backends=["PYTORCH"], patch_backprop=True)
    compiled = accelerate_model(_net(), backends=["COMPILE"], patch_backprop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)  # a dropped backend warns
        want, got = _train(eager), _train(compiled)
    assert active_backend(compiled) == "COMPILE", engine_of(compiled).dropped
    hidden, head = got[0], got[4]  # layer 0 weight, layer 4 (the head) weight
    assert int((hidden.abs().sum(dim=1) > 0).sum()) == 13  # ceil(0.1 x 128) rows
    assert int((head.abs().sum(dim=1) > 0).sum()) == 64  # the head keeps its dense backward
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)
    for a, b in zip(eager.parameters(), compiled.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)


def test_a_patched_model_compiled_by_the_user_keeps_the_top_k_backward() -> None:
    net = _net()
    apply_sparse_backprop(net, SparseBackpropConfig())
    _train(net, steps=1)  # the eager step finds the head
    fast = torch.compile(copy.deepcopy(net), backend="eager")
    grads = _train(fast, steps=1)
    assert int((grads[0].abs().sum(dim=1) > 0).sum()) == 13
    assert int((grads[4].abs().sum(dim=1) > 0).sum()) == 64
