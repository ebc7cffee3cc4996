"""fast_optimizer takes an optimizer whose parameter groups are still empty."""

from __future__ import annotations

import torch

from scramjet.accel import fast_optimizer


def test_an_optimizer_whose_groups_are_empty_is_rebuilt_with_default_kernels() -> None:
    # Every layer frozen when the optimizer was built: torch accepts empty groups.
    opt = torch.optim.AdamW([{"params": []}, {"params": [], "weight_decay": 0.0}], lr=0.1)
    fast = fast_optimizer(opt)
    assert type(fast) is torch.optim.AdamW
    assert [g["weight_decay"] for g in fast.param_groups] == [0.01, 0.0]
    fast.step()
    p = torch.nn.Parameter(torch.ones(2))
    fast.add_param_group({"params": [p]})
    p.grad = torch.ones(2)
    fast.step()
    assert torch.all(p < 1)
