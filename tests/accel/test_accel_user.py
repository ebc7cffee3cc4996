"""A practitioner's use of scramjet.accel: per-sample gradients, optimizers, caches."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from scramjet.accel import accelerate_model, fast_optimizer


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4)
    )


def test_per_sample_gradients_of_a_model_with_sparse_backprop_are_the_dense_ones():
    # DP-SGD style per-sample gradients with torch.func on a model accelerated with
    # patch_backprop=True (nebulgym's default): the transform runs eagerly, so the top-k
    # backward (an autograd.Function without functorch support) must not be in its way.
    plain = _mlp()
    fast = accelerate_model(_mlp(), backends=["PYTORCH"], patch_backprop=True)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    nn.functional.cross_entropy(fast(x), y).backward()  # a training step: heads found

    def per_sample(model: nn.Module) -> dict[str, torch.Tensor]:
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            out = functional_call(model, p, (xi[None],))
            return nn.functional.cross_entropy(out, yi[None])

        return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)

    got = {k.removeprefix("module."): v for k, v in per_sample(fast).items()}
    want = per_sample(plain)
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=name)
    jac = torch.func.jacrev(fast)(x[:2])
    torch.testing.assert_close(jac, torch.func.jacrev(plain)(x[:2]))


class _WarmAdam(torch.optim.Adam):
    """A user's optimizer: Adam with a setting of its own."""

    def __init__(self, params: Any, warmup: int = 3) -> None:
        super().__init__(params, lr=1e-2)
        self.warmup = warmup


class _ScheduledAdam(torch.optim.Adam):
    """A user's optimizer whose constructor takes a required argument."""

    def __init__(self, params: Any, total_steps: int) -> None:
        super().__init__(params, lr=1e-2)
        self.total_steps = total_steps


def test_fast_optimizer_keeps_the_settings_of_a_users_optimizer_subclass():
    model = nn.Linear(4, 3)
    fast = fast_optimizer(_WarmAdam(model.parameters(), warmup=50))
    assert isinstance(fast, _WarmAdam)
    assert fast.warmup == 50  # not silently back to the constructor's default (3)
    with pytest.raises(TypeError, match=r"_ScheduledAdam.*total_steps.*fast_optimizer_kwargs"):
        fast_optimizer(_ScheduledAdam(model.parameters(), total_steps=10))
