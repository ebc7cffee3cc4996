from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn

from scramjet.accel import (
    SparseBackpropConfig,
    accelerate_model,
    apply_sparse_backprop,
    remove_sparse_backprop,
)
from scramjet.accel.sparse_backprop import sparse_linear


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 8)
        )
        self.head = nn.Linear(8, 2)  # small layer and output head: must stay dense

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def test_every_parameter_receives_gradient_including_small_head():
    torch.manual_seed(0)
    model = accelerate_model(MLP(), backends=["PYTORCH"], patch_backprop=True)
    loss = nn.functional.cross_entropy(model(torch.randn(32, 16)), torch.randint(0, 2, (32,)))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    # The head and the 8-unit layer are dense: every row of their weights moves.
    assert (model.module.head.weight.grad.abs().sum(1) > 0).all()
    assert (model.module.body[4].weight.grad.abs().sum(1) > 0).all()


def test_only_large_non_head_layers_are_patched():
    patched = apply_sparse_backprop(MLP(), SparseBackpropConfig(ratio=0.1, min_features=64))
    assert patched == {"body.0": 13, "body.2": 26}


def test_kept_units_get_exact_dense_gradients():
    torch.manual_seed(0)
    x = torch.randn(5, 7, 12, requires_grad=True)  # N-D input, like a transformer block
    w = torch.randn(40, 12, requires_grad=True)
    b = torch.randn(40, requires_grad=True)
    g = torch.randn(5, 7, 40)
    sparse_linear(x, w, b, 6).backward(g)
    gx, gw, gb = x.grad.clone(), w.grad.clone(), b.grad.clone()
    kept = g.reshape(-1, 40).abs().sum(0).topk(6).indices
    mask = torch.zeros(40)
    mask[kept] = 1
    x.grad = w.grad = b.grad = None
    nn.functional.linear(x, w, b).backward(g * mask)
    torch.testing.assert_close(gx, x.grad)
    torch.testing.assert_close(gw, w.grad)
    torch.testing.assert_close(gb, g.reshape(-1, 40).sum(0))  # bias stays dense
    assert int((gw.abs().sum(1) > 0).sum()) == 6


def test_transformer_block_under_bf16_autocast_trains():
    torch.manual_seed(0)
    block = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=128, batch_first=True)
    model = nn.Sequential(block, nn.Linear(32, 4))
    fast = accelerate_model(model, backends=["PYTORCH"], patch_backprop=True, autocast="bf16")
    x = torch.randn(4, 10, 32)
    out = fast(x)
    assert out.dtype == torch.float32
    out.square().mean().backward()
    linear1 = model[0].linear1
    assert linear1.weight.grad is not None and linear1.weight.grad.dtype == torch.float32
    assert int((linear1.weight.grad.abs().sum(1) > 0).sum()) == 13  # ceil(0.1 * 128)


def test_patched_model_pickles_and_patch_is_removable():
    model = MLP()
    apply_sparse_backprop(model)
    clone = pickle.loads(pickle.dumps(model))
    assert clone(torch.randn(2, 16)).shape == (2, 2)
    assert sorted(remove_sparse_backprop(clone)) == ["body.0", "body.2"]
    assert "forward" not in clone.body[0].__dict__
    assert list(clone.state_dict()) == list(MLP().state_dict())


def test_config_rejects_bad_ratio():
    with pytest.raises(ValueError, match="ratio"):
        SparseBackpropConfig(ratio=0)
