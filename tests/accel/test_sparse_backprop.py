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


def _rows(layer: nn.Linear) -> int:
    """Weight rows of ``layer`` that received gradient."""
    assert layer.weight.grad is not None
    return int((layer.weight.grad.abs().sum(1) > 0).sum())


class HeadFirst(nn.Module):
    """The output head is registered before the body."""

    def __init__(self, log_softmax: bool = False) -> None:
        super().__init__()
        self.head = nn.Linear(256, 100)
        self.body = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
        self.out = nn.LogSoftmax(-1) if log_softmax else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.head(self.body(x)))


def _step(model: nn.Module, n: int = 16) -> None:
    out = model(torch.randn(n, 32))
    nn.functional.cross_entropy(out, torch.randint(0, 100, (n,))).backward()


@pytest.mark.parametrize("build", ["apply", "wrapper", "decorated_bf16"])
@pytest.mark.parametrize("log_softmax", [False, True])
def test_head_registered_first_stays_dense_from_the_first_step(build, log_softmax):
    torch.manual_seed(0)
    if build == "apply":
        model = HeadFirst(log_softmax)
        patched = apply_sparse_backprop(model)
        assert patched == {"head": 10, "body.0": 26, "body.2": 26}  # head not known yet
        net = model
    elif build == "wrapper":
        model = HeadFirst(log_softmax)
        net = accelerate_model(model, backends=["PYTORCH"], patch_backprop=True)
    else:
        decorated = accelerate_model(backends=["PYTORCH"], patch_backprop=True, autocast="bf16")
        net = model = decorated(HeadFirst)(log_softmax)  # outputs come back as fp32 copies
    _step(net)
    # First step: every row of the real head learns; the body's last Linear is sparse.
    assert _rows(model.head) == 100
    assert _rows(model.body[0]) == 26 and _rows(model.body[2]) == 26
    assert "forward" not in model.head.__dict__  # back to the plain dense forward
    if build == "apply":
        assert patched == {"body.0": 26, "body.2": 26}
    model.zero_grad()
    _step(net)
    assert _rows(model.head) == 100 and _rows(model.body[2]) == 26


class AuxLast(nn.Module):
    """An auxiliary Linear registered last: inside the body, or a side output."""

    def __init__(self, side_output: bool) -> None:
        super().__init__()
        self.body = nn.Linear(32, 256)
        self.head = nn.Linear(256, 100)
        self.aux = nn.Linear(256, 256)
        self.side_output = side_output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.body(x))
        if self.side_output:  # audit case: the aux term is added after the head ran
            return self.head(h) + 0 * self.aux(h).sum()
        return self.head(h * torch.sigmoid(self.aux(h)))  # a gate: not an output layer


@pytest.mark.parametrize("side_output", [False, True])
def test_aux_linear_registered_last_is_not_taken_for_the_head(side_output):
    torch.manual_seed(0)
    model = AuxLast(side_output)
    patched = apply_sparse_backprop(model)
    _step(model)
    assert _rows(model.head) == 100
    assert _rows(model.body) == 26
    if side_output:  # it feeds the output, not another Linear: a head as well, dense
        assert patched == {"body": 26}
    else:
        assert patched == {"body": 26, "aux": 26} and _rows(model.aux) == 26


def test_every_head_of_a_multi_output_model_stays_dense():
    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cls = nn.Linear(256, 100)
            self.box = nn.Linear(256, 64)
            self.body = nn.Sequential(nn.Linear(32, 256), nn.ReLU())

        def forward(self, x: torch.Tensor) -> dict[str, tuple[torch.Tensor, ...]]:
            h = self.body(x)
            return {"out": (self.cls(h), torch.tanh(self.box(h)))}

    torch.manual_seed(0)
    model = TwoHeads()
    patched = apply_sparse_backprop(model)
    out = model(torch.randn(16, 32))["out"]
    (out[0].square().mean() + out[1].square().mean()).backward()
    assert _rows(model.cls) == 100 and _rows(model.box) == 64
    assert _rows(model.body[0]) == 26 and patched == {"body.0": 26}


def test_heads_named_explicitly_and_bad_names_are_rejected():
    torch.manual_seed(0)
    model = HeadFirst()
    cfg = SparseBackpropConfig(exclude_head=False, exclude=("head",))
    assert apply_sparse_backprop(model, cfg) == {"body.0": 26, "body.2": 26}
    _step(model)
    assert _rows(model.head) == 100 and _rows(model.body[2]) == 26
    with pytest.raises(ValueError, match=r"\['hed'\] are not Linear layers"):
        apply_sparse_backprop(HeadFirst(), SparseBackpropConfig(exclude=("hed",)))
    with pytest.raises(TypeError, match=r"exclude=\('head',\)"):
        SparseBackpropConfig(exclude="head")


def test_a_copy_made_before_the_first_step_finds_its_heads_and_removal_stops_it():
    model = HeadFirst()
    apply_sparse_backprop(model)
    clone = pickle.loads(pickle.dumps(model))
    torch.manual_seed(0)
    _step(clone)
    assert _rows(clone.head) == 100 and _rows(clone.body[2]) == 26
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in clone.modules())
    assert "forward" in model.head.__dict__  # the original has not decided yet
    # Removing the patch before the first step leaves plain layers and no hooks behind.
    assert sorted(remove_sparse_backprop(model)) == ["body.0", "body.2", "head"]
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    _step(model)
    assert _rows(model.body[2]) > 200 and _rows(model.head) == 100  # dense (ReLU zeros a few)


def test_no_grad_and_repeated_forwards_before_the_backward_keep_the_choice_right():
    torch.manual_seed(0)
    model = HeadFirst()
    apply_sparse_backprop(model)
    with torch.no_grad():
        model(torch.randn(4, 32))  # e.g. a validation pass before training
    x, y = torch.randn(16, 32), torch.randint(0, 100, (16,))
    first = nn.functional.cross_entropy(model(x), y)
    second = nn.functional.cross_entropy(model(x), y)  # gradient accumulation
    with torch.no_grad():
        model(x)  # logging between forward and backward
    (first + second).backward()
    assert _rows(model.head) == 100 and _rows(model.body[2]) == 26
