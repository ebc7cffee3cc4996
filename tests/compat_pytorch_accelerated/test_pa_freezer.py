"""ModelFreezer on a model whose layers were frozen by hand, as fine-tuning code often does
before (or besides) the freezer: what it reports and what ``unfreeze`` hands the optimizer."""

from __future__ import annotations

import torch
from torch import nn

from scramjet.compat.pytorch_accelerated.finetuning import ModelFreezer


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_layers_frozen_by_hand_are_reported_frozen() -> None:
    model = _model()
    model[0].requires_grad_(False)
    freezer = ModelFreezer(model)
    assert [layer.is_frozen for layer in freezer.get_layers()] == [True, False, False]
    assert [group.is_frozen for group in freezer.get_layer_groups()] == [True, False, False]


def test_unfreeze_returns_the_parameters_it_thawed_for_the_optimizer() -> None:
    model = _model()
    model[0].requires_grad_(False)  # the backbone, frozen before the optimizer was built
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    freezer = ModelFreezer(model)
    thawed = freezer.unfreeze()
    assert all(p.requires_grad for p in model.parameters())
    assert list(thawed) == [0]
    assert thawed[0]["params"] == list(model[0].parameters())
    optimizer.add_param_group(thawed[0])
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert held == {id(p) for p in model.parameters()}


def test_freeze_after_a_manual_unfreeze_freezes_again() -> None:
    model = _model()
    freezer = ModelFreezer(model)
    freezer.freeze(0, 0)
    model[0].requires_grad_(True)  # thawed outside the freezer
    assert not freezer.get_layers()[0].is_frozen
    freezer.freeze(0, 0)
    assert [p.requires_grad for p in model.parameters()] == [False, False, True, True]
    assert freezer.unfreeze(0, 0)[0]["params"] == list(model[0].parameters())


def test_unfreeze_returns_the_frozen_parameters_of_a_partly_frozen_layer() -> None:
    model = _model()
    model[2].bias.requires_grad_(False)  # e.g. a head whose bias is kept fixed
    freezer = ModelFreezer(model)
    assert freezer.unfreeze() == {2: {"params": [model[2].bias]}}
