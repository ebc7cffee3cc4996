"""A group added after fast_optimizer gets the settings the user built the optimizer with.

``Optimizer.add_param_group`` fills a new group's missing settings from ``defaults`` (gradual
unfreezing: ``opt.add_param_group({"params": backbone.parameters()})``).
"""

from __future__ import annotations

import torch

from scramjet.accel import fast_optimizer


def _added_group(opt: torch.optim.Optimizer) -> dict[str, object]:
    opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(3))]})
    return opt.param_groups[-1]


def test_added_group_takes_the_users_settings_not_the_class_defaults() -> None:
    head = torch.nn.Linear(3, 2)
    built = {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4}
    plain = torch.optim.SGD(head.parameters(), **built)
    fast = fast_optimizer(torch.optim.SGD(head.parameters(), **built))
    want, got = _added_group(plain), _added_group(fast)
    for key in built:
        assert got[key] == want[key], key
    assert got["fused"] == fast.param_groups[0]["fused"]  # the kernels chosen for the rest


def test_added_adamw_group_trains_like_the_plain_optimizers() -> None:
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(4)), torch.nn.Parameter(torch.randn(4))
    a2, b2 = torch.nn.Parameter(a.detach().clone()), torch.nn.Parameter(b.detach().clone())
    plain = torch.optim.AdamW([a], lr=0.3, betas=(0.8, 0.9), weight_decay=0.5)
    fast = fast_optimizer(torch.optim.AdamW([a2], lr=0.3, betas=(0.8, 0.9), weight_decay=0.5))
    plain.add_param_group({"params": [b]})
    fast.add_param_group({"params": [b2]})
    for _ in range(3):
        for opt, params in ((plain, (a, b)), (fast, (a2, b2))):
            opt.zero_grad()
            sum((p**2).sum() for p in params).backward()
            opt.step()
    torch.testing.assert_close(b2, b, rtol=1e-6, atol=1e-7)
