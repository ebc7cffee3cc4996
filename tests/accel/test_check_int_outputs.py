"""The first-step check compares integer and bool outputs (class indices, masks) exactly."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

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


class Classifier(nn.Module):
    """Logits, the predicted class indices and a confidence mask, as a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.lin(x)
        return {"logits": logits, "pred": logits.argmax(-1), "mask": logits > 0}


def _shift_pred(out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**out, "pred": (out["pred"] + 1) % 4}  # wrong classes, right logits


def _flip_mask(out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**out, "mask": ~out["mask"]}


def _as_long(out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**out, "mask": out["mask"].long()}  # same values, another dtype


def _wrapping(change: Callable[[Any], Any]) -> Callable[..., Any]:
    def build(fn: Callable[..., Any], ctx: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: change(fn(*args, **kwargs))

    return build


@pytest.fixture
def backends() -> Iterator[None]:
    made = {
        "SHIFTPRED": _wrapping(_shift_pred),
        "FLIPMASK": _wrapping(_flip_mask),
        "LONGMASK": _wrapping(_as_long),
        "SAME": _wrapping(lambda out: out),
        "FULLPREC": lambda fn, ctx: getattr(fn, "full_precision", fn),
    }
    for name, build in made.items():
        register_backend(name, build)
    yield
    for name in made:
        unregister_backend(name)


def _two_steps(model: nn.Module, x: torch.Tensor) -> list[str]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    y = torch.arange(x.shape[0]) % 4
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2):
            out = model(x)
            loss = nn.functional.cross_entropy(out["logits"].float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [str(w.message) for w in record if issubclass(w.category, AccelerationWarning)]


def _x() -> torch.Tensor:
    return torch.randn(32, 8, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("backend", "what"),
    [("SHIFTPRED", "int64 output 0"), ("FLIPMASK", "bool output 1"), ("LONGMASK", "dtype")],
)
def test_backend_with_wrong_integer_or_bool_output_is_dropped(backends, backend, what) -> None:
    torch.manual_seed(0)
    model = accelerate_model(Classifier(), backends=[backend])
    messages = _two_steps(model, _x())
    assert active_backend(model) == "PYTORCH"
    assert len(messages) == 1 and f"'{backend}' dropped" in messages[0], messages
    assert what in messages[0], messages


def test_wrong_class_indices_are_dropped_under_autocast_too(backends) -> None:
    torch.manual_seed(0)
    model = accelerate_model(Classifier(), backends=["SHIFTPRED"], autocast="bf16")
    messages = _two_steps(model, _x())
    assert active_backend(model) == "PYTORCH"
    assert len(messages) == 1 and "'SHIFTPRED' dropped" in messages[0], messages


def test_a_backend_with_identical_integer_outputs_is_kept(backends) -> None:
    torch.manual_seed(0)
    model = accelerate_model(Classifier(), backends=["SAME"])
    assert _two_steps(model, _x()) == [] and active_backend(model) == "SAME"


def test_under_autocast_indices_that_match_full_precision_are_kept(backends) -> None:
    # Two logits 0.001 apart: bf16 rounds them equal (eager's argmax takes the first), full
    # precision tells them apart. A backend computing in full precision is more accurate.
    torch.manual_seed(0)
    base = Classifier()
    with torch.no_grad():
        base.lin.weight.zero_()
        base.lin.bias.zero_()
        base.lin.weight[0, 0], base.lin.weight[1, 0] = 1.0, 1.001
    x = torch.ones(8, 8)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert base(x)["pred"].tolist() == [0] * 8  # the tie bf16 makes
    model = accelerate_model(base, backends=["FULLPREC"], autocast="bf16")
    assert _two_steps(model, x) == [] and active_backend(model) == "FULLPREC"
