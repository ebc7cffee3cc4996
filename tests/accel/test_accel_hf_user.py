"""A practitioner's checks of ``accelerate_model`` on Hugging Face models and on outputs
and inputs beyond plain tensors: what the first-step check sees, and what it must not touch."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
from torch import nn

from scramjet.accel import (
    AccelerationWarning,
    accelerate_model,
    active_backend,
    register_backend,
    unregister_backend,
)


@pytest.fixture
def checked_backends():
    """``SAME`` runs eager's forward (it must pass the check); ``SCALED`` is wrong by 1.5x."""

    def build_same(fn, ctx):
        return lambda *args, **kwargs: fn(*args, **kwargs)

    def build_scaled(fn, ctx):
        def run(*args, **kwargs):
            out = fn(*args, **kwargs)
            return dataclasses.replace(out, logits=out.logits * 1.5)

        return run

    register_backend("SAME", build_same)
    register_backend("SCALED", build_scaled)
    yield
    unregister_backend("SAME")
    unregister_backend("SCALED")


@dataclasses.dataclass
class Prediction:
    logits: torch.Tensor
    hidden: torch.Tensor


class ReturnsDataclass(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> Prediction:
        hidden = torch.relu(self.body(x))
        return Prediction(logits=self.head(hidden), hidden=hidden)


def _accel_messages(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, AccelerationWarning)]


def test_a_wrong_backend_is_caught_on_a_model_returning_a_dataclass(checked_backends):
    torch.manual_seed(0)
    model = accelerate_model(ReturnsDataclass(), backends=["SCALED"])
    x = torch.randn(3, 4)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = model(x)
    assert active_backend(model) == "PYTORCH"
    assert any("'SCALED' dropped" in m for m in _accel_messages(record))
    assert torch.equal(out.logits, model.module(x).logits)


def test_autocast_hands_dataclass_outputs_back_in_fp32() -> None:
    model = accelerate_model(ReturnsDataclass(), backends=["PYTORCH"], autocast="bf16")
    out = model(torch.randn(3, 4))
    assert isinstance(out, Prediction)
    assert out.logits.dtype == torch.float32
    assert out.hidden.dtype == torch.float32
