"""A parameter kept as a plain value of a state (a callback's learnable temperature, say)
comes back from a checkpoint as a parameter, a leaf: it came back as a plain tensor whose
``grad_fn`` was the copy's (CloneBackward), so an optimizer refused it as a non-leaf."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from scramjet.checkpoint import CheckpointManager


class Holder:
    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value

    def state_dict(self) -> dict[str, Any]:
        return self.value

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.value = state


def test_parameters_and_grad_tensors_come_back_as_leaves(tmp_path: Path) -> None:
    saved = {"temperature": torch.nn.Parameter(torch.tensor([1.5])),
             "ema": torch.randn(3, requires_grad=True)}  # fmt: skip
    CheckpointManager(tmp_path).save({"holder": Holder(saved)}, step=1)
    restored = Holder({})
    CheckpointManager(tmp_path).load({"holder": restored})
    temperature, ema = restored.value["temperature"], restored.value["ema"]
    assert isinstance(temperature, torch.nn.Parameter) and temperature.grad_fn is None
    assert temperature.is_leaf and temperature.requires_grad
    assert ema.is_leaf and ema.requires_grad and ema.grad_fn is None
    torch.testing.assert_close(temperature.detach(), saved["temperature"].detach())
    torch.optim.SGD([temperature], lr=0.1)  # a non-leaf is refused here
