"""Names a user sees on a wrapped model: the plain model's, as ``state_dict()`` gives them."""

from __future__ import annotations

import torch
from torch import nn

from scramjet.accel import AcceleratedModel, accelerate_model


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
        self.head = nn.Linear(8, 2)
        self.register_buffer("scale", torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.encoder(x))) * self.scale


def _pair() -> tuple[nn.Module, AcceleratedModel]:
    torch.manual_seed(0)
    plain = _Net()
    torch.manual_seed(0)
    return plain, accelerate_model(_Net(), backends=["PYTORCH"])


def test_named_parameters_buffers_and_modules_are_the_plain_models_names():
    plain, fast = _pair()
    assert [n for n, _ in fast.named_parameters()] == [n for n, _ in plain.named_parameters()]
    assert [n for n, _ in fast.named_buffers()] == [n for n, _ in plain.named_buffers()]
    plain_modules = [n for n, _ in plain.named_modules() if n]
    assert [n for n, _ in fast.named_modules() if n] == plain_modules
    # the names agree with state_dict() and reach the same tensors
    names = {n for n, _ in fast.named_parameters()} | {n for n, _ in fast.named_buffers()}
    assert names == set(fast.state_dict())
    for name, p in fast.named_parameters():
        assert fast.get_parameter(name) is p


def test_freezing_and_weight_decay_groups_by_name_work_after_wrapping():
    _, fast = _pair()
    for name, p in fast.named_parameters():
        p.requires_grad_(not name.startswith("encoder."))
    assert not any(p.requires_grad for p in fast.module.encoder.parameters())
    assert all(p.requires_grad for p in fast.module.head.parameters())

    # minGPT's configure_optimizers: module names joined with their own parameter names
    # must be the names named_parameters() gives.
    decay, no_decay = set(), set()
    for mn, m in fast.named_modules():
        for pn, _ in m.named_parameters(recurse=False):
            full = f"{mn}.{pn}" if mn else pn
            (decay if pn == "weight" and isinstance(m, nn.Linear) else no_decay).add(full)
    params = dict(fast.named_parameters())
    assert decay | no_decay == set(params)
    torch.optim.AdamW([{"params": [params[n] for n in sorted(decay)], "weight_decay": 0.1}])


def test_a_wrapped_submodule_is_named_as_in_its_parents_state_dict():
    torch.manual_seed(0)
    parent = nn.Sequential(accelerate_model(_Net(), backends=["PYTORCH"]), nn.Linear(2, 1))
    names = [n for n, _ in parent.named_parameters()]
    assert names[0] == "0.encoder.0.weight"
    assert {n for n, _ in parent.named_parameters()} <= set(parent.state_dict())
    assert len(names) == len(list(parent.parameters()))


def test_state_dict_moves_between_plain_and_wrapped_by_name():
    plain, fast = _pair()
    with torch.no_grad():
        for p in plain.parameters():
            p.add_(1.0)
    fast.load_state_dict(plain.state_dict())
    back = _Net()
    back.load_state_dict(fast.state_dict())
    x = torch.randn(5, 4)
    plain.eval(), fast.eval(), back.eval()
    torch.testing.assert_close(fast(x), plain(x), rtol=0, atol=0)
    torch.testing.assert_close(back(x), plain(x), rtol=0, atol=0)
