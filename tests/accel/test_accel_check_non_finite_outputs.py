"""The first-step check accepts NaN and ±inf where eager has them (masked logits, fully
padded attention rows) and still refuses a backend that puts them elsewhere."""

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


class MaskedAttention(nn.Module):
    """Padding masked with -inf before a softmax; a fully padded row comes out NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.score = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> dict[str, torch.Tensor]:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q @ k.transpose(1, 2)).masked_fill(pad[:, None, :], float("-inf"))
        hidden = scores.softmax(-1) @ v
        return {"hidden": hidden, "logits": self.score(x).masked_fill(pad[..., None], -torch.inf)}


def _wrapping(change: Callable[[Any], Any]) -> Callable[..., Any]:
    def build(fn: Callable[..., Any], ctx: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: change(fn(*args, **kwargs))

    return build


def _nan_in_logits(out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    logits = out["logits"].clone()
    logits[0, 0, 0] = float("nan")  # a finite entry of eager's turned NaN
    return {**out, "logits": logits}


def _inf_sign_flipped(out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**out, "logits": out["logits"].nan_to_num(neginf=float("inf"), posinf=float("inf"))}


@pytest.fixture
def backends() -> Iterator[None]:
    made = {
        "SAMEOUT": _wrapping(lambda out: out),
        "NANLOGIT": _wrapping(_nan_in_logits),
        "POSINF": _wrapping(_inf_sign_flipped),
    }
    for name, builder in made.items():
        register_backend(name, builder)
    yield
    for name in made:
        unregister_backend(name)


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    pad = torch.zeros(3, 4, dtype=torch.bool)
    pad[0, 2:] = True  # padded tail
    pad[2] = True  # a fully padded sequence: its attention row is NaN
    return torch.randn(3, 4, 8), pad


def _run(backend: str, train: bool) -> tuple[str | None, list[str]]:
    torch.manual_seed(1)
    model = accelerate_model(MaskedAttention(), backends=[backend]).train(train)
    x, pad = _inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AccelerationWarning)
        out = model(x, pad)
    assert out["logits"].isneginf().sum() == int(pad.sum()) * 5
    assert out["hidden"][2].isnan().all() and out["hidden"][:2].isfinite().all()
    return active_backend(model), [str(w.message) for w in caught]


@pytest.mark.parametrize("train", [True, False])
def test_backend_equal_to_eager_with_nan_and_inf_outputs_is_kept(
    backends: None, train: bool
) -> None:
    active, warned = _run("SAMEOUT", train)
    assert warned == []
    assert active == "SAMEOUT"


@pytest.mark.parametrize("backend", ["NANLOGIT", "POSINF"])
def test_backend_with_non_finite_entries_elsewhere_is_dropped(backends: None, backend: str) -> None:
    active, warned = _run(backend, True)
    assert active == "PYTORCH"
    assert len(warned) == 1 and f"backend {backend!r} dropped (failed at check" in warned[0]
