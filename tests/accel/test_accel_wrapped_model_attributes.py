"""A nebulgym user's wrapped models in ``scramjet.accel``: attributes set on a wrapped model,
parameters shared across the decorated boundary, complex outputs, and the arguments of
``accelerate_model`` that used to be taken without a word."""

from __future__ import annotations

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
    """``SAME`` runs eager's forward (it must pass the check); ``SCALED`` is 1.5x off."""

    def build_same(fn, ctx):
        return lambda *args, **kwargs: fn(*args, **kwargs)

    def build_scaled(fn, ctx):
        return lambda *args, **kwargs: fn(*args, **kwargs) * 1.5

    register_backend("SAME", build_same)
    register_backend("SCALED", build_scaled)
    yield
    unregister_backend("SAME")
    unregister_backend("SCALED")


def _accel_messages(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, AccelerationWarning)]


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)
        self.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x))) * self.scale


def test_a_head_replaced_on_the_wrapper_is_the_head_the_forward_uses() -> None:
    fast = accelerate_model(Scaled(), backends=["PYTORCH"])
    fast.head = nn.Linear(8, 5)  # fine-tuning on 5 classes
    assert fast(torch.randn(2, 4)).shape == (2, 5)
    assert fast.module.head is fast.head
    state = fast.state_dict()
    assert state["head.weight"].shape == (5, 8)
    assert len(list(fast.parameters())) == 4  # no stray head the optimizer would step
    fast.load_state_dict(state)


def test_a_plain_attribute_set_on_the_wrapper_reaches_the_forward() -> None:
    fast = accelerate_model(Scaled(), backends=["PYTORCH"])
    fast.scale = 0.0
    assert fast.module.scale == 0.0
    assert float(fast(torch.randn(2, 4)).detach().abs().sum()) == 0.0
    fast.train(False)  # the wrapper's own flags stay its own, and still reach the model
    assert not fast.training and not fast.module.training
    del fast.scale
    assert not hasattr(fast.module, "scale")


class TiedHead(nn.Module):
    """An output layer that reuses the embedding matrix of the model around it."""

    def __init__(self, weight: nn.Parameter) -> None:
        super().__init__()
        self.weight = weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.weight.t()


def test_a_head_tied_to_an_embedding_outside_it_keeps_the_callers_graph(checked_backends):
    torch.manual_seed(0)
    tokens = torch.randint(0, 10, (3, 5))
    grads = []
    for backends in (None, ["SAME"]):
        embedding = nn.Embedding(10, 8)
        embedding.weight.data = torch.arange(80.0).reshape(10, 8) / 80
        head = TiedHead(embedding.weight)
        if backends is not None:
            head = accelerate_model(head, backends=backends)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            head(embedding(tokens)).pow(2).sum().backward()  # used to raise here
        assert _accel_messages(record) == []
        grads.append(embedding.weight.grad)
    assert active_backend(head) == "SAME"
    torch.testing.assert_close(grads[1], grads[0])  # both paths reach the tied weight


class Spectrum(nn.Module):
    """A spectral layer: its output is complex (an FFT of a learned projection)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.fft(self.proj(x)).conj()


@pytest.mark.parametrize(("backend", "kept"), [("SCALED", False), ("SAME", True)])
def test_a_complex_output_is_checked_like_a_float_one(checked_backends, backend, kept):
    model = accelerate_model(Spectrum(), backends=[backend])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model(torch.randn(2, 8)).abs().sum().backward()
    messages = _accel_messages(record)
    if kept:
        assert messages == [] and active_backend(model) == "SAME"
    else:  # a wrong spectrum used to pass unseen and stay active
        assert len(messages) == 1 and "SCALED" in messages[0] and "check" in messages[0]
        assert active_backend(model) == "PYTORCH"


def test_a_tolerance_given_as_a_number_is_refused_before_it_costs_a_backend(checked_backends):
    with pytest.raises(TypeError, match=r"got 0\.001; pass tolerance=Tolerance\("):
        accelerate_model(Scaled(), backends=["SAME"], tolerance=1e-3)


def test_a_backend_list_holding_something_else_than_names_says_what_it_holds() -> None:
    with pytest.raises(TypeError, match=r"holds None \(NoneType\); expected backend names"):
        accelerate_model(Scaled(), backends=["COMPILE", None])


@pytest.mark.parametrize("form", ["instance", "class"])
def test_a_mistyped_compile_mode_is_an_error_not_a_dropped_backend(form) -> None:
    target = Scaled() if form == "instance" else Scaled
    with pytest.raises(ValueError, match=r"compile_mode='max_autotune' is not a torch\.compile"):
        accelerate_model(target, backends=["COMPILE"], compile_mode="max_autotune")
    assert accelerate_model(Scaled(), backends=["COMPILE"], compile_mode="max-autotune")


class ScoresInDouble(nn.Module):
    """Logits, and a score the model computes in float64 on purpose."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.proj(x)
        return {"logits": logits, "score": logits.double().logsumexp(1), "pred": logits.argmax(1)}


def test_autocast_hands_low_precision_outputs_back_in_fp32_and_keeps_float64() -> None:
    torch.manual_seed(0)
    plain = ScoresInDouble()
    model = accelerate_model(plain, backends=["PYTORCH"], autocast="bf16")
    x = torch.randn(3, 4)
    out = model(x)
    assert out["logits"].dtype == torch.float32  # bf16 under autocast, handed back in fp32
    assert out["pred"].dtype == torch.int64
    assert out["score"].dtype == torch.float64  # was cut to float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = plain(x)["score"]
    assert torch.equal(out["score"], want)
