from __future__ import annotations

import pytest
import torch
from torch import nn

from scramjet.accel import accelerate_model, fast_optimizer, fast_optimizer_kwargs, tf32
from scramjet.accel.extras import (
    inputs_to_channels_last,
    resolve_autocast,
    set_tf32,
    to_channels_last,
)


def test_channels_last_converts_weights_and_inputs():
    conv = to_channels_last(nn.Conv2d(3, 4, 3))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    args, _ = inputs_to_channels_last(((torch.randn(2, 3, 5, 5), torch.randn(2, 3)), {}))
    assert args[0].is_contiguous(memory_format=torch.channels_last)
    model = accelerate_model(nn.Conv2d(3, 4, 3), backends=["PYTORCH"], channels_last=True)
    torch.testing.assert_close(model(torch.ones(1, 3, 5, 5)).shape, torch.Size([1, 4, 3, 3]))


def test_tf32_switch_restores_previous_settings():
    before = torch.backends.cuda.matmul.allow_tf32
    with tf32(not before):
        assert torch.backends.cuda.matmul.allow_tf32 is (not before)
    assert torch.backends.cuda.matmul.allow_tf32 is before
    previous = set_tf32(True)
    set_tf32(previous["matmul"])


def test_fast_optimizer_keeps_state_and_selects_fused_kernels():
    assert fast_optimizer_kwargs(torch.optim.AdamW, "cpu") == {"fused": True}
    assert fast_optimizer_kwargs(torch.optim.AdamW, "cuda") == {"fused": True}
    assert fast_optimizer_kwargs(torch.optim.RMSprop, "cpu") == {"foreach": True}
    model = nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    fast = fast_optimizer(opt)
    assert fast.param_groups[0]["fused"] is True and fast.param_groups[0]["lr"] == 0.01
    assert torch.equal(fast.state[model.weight]["exp_avg"], opt.state[model.weight]["exp_avg"])
    fast.step()


def test_autocast_option_names_and_fp32_outputs():
    assert resolve_autocast("bf16") is torch.bfloat16 and resolve_autocast(None) is None
    with pytest.raises(ValueError, match="bf16"):
        resolve_autocast("fp8")
    model = accelerate_model(nn.Linear(4, 2), backends=["PYTORCH"], autocast="bf16")
    assert model(torch.randn(3, 4)).dtype == torch.float32
