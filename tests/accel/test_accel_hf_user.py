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


def _tiny_llama(accelerated: bool = False) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
    )
    cls = accelerate_model(backends=["SAME"])(LlamaForCausalLM) if accelerated else LlamaForCausalLM
    return cls(config).eval()


def test_generate_with_a_kv_cache_gives_the_plain_models_tokens(checked_backends):
    # generate() passes a cache object that each forward extends: the check's trial runs
    # must not extend the caller's cache too. (The decorated class: generate() reached
    # through an AcceleratedModel runs on the wrapped module, unaccelerated.)
    plain = _tiny_llama()
    model = _tiny_llama(accelerated=True)
    prompt = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(1))
    kwargs = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": 0}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = model.generate(prompt, **kwargs)
    assert _accel_messages(record) == []
    assert active_backend(model) == "SAME"
    assert torch.equal(got, plain.generate(prompt, **kwargs))


class Appender:
    """A mutable, non-tensor input the forward changes (a key/value cache in miniature)."""

    def __init__(self) -> None:
        self.seen: list[torch.Tensor] = []


class UsesAppender(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor, memory: Appender) -> torch.Tensor:
        memory.seen.append(x)
        return self.lin(torch.stack(memory.seen).sum(0))


@pytest.mark.parametrize("grad", [True, False])
def test_an_input_object_the_forward_changes_is_changed_once_by_the_checked_call(
    checked_backends, grad
):
    torch.manual_seed(0)
    plain = UsesAppender()
    model = accelerate_model(UsesAppender(), backends=["SAME"])
    model.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3)
    memory, plain_memory = Appender(), Appender()
    with torch.set_grad_enabled(grad), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = model(x, memory)
        expected = plain(x, plain_memory)
    assert _accel_messages(record) == []
    assert len(memory.seen) == 1
    assert torch.equal(out, expected)
    assert active_backend(model) == "SAME"


class LockedAppender(Appender):
    """An input that cannot be deep-copied (it holds a lock)."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.lock = threading.Lock()


def test_an_input_that_cannot_be_copied_runs_eagerly_and_keeps_the_backend(checked_backends):
    torch.manual_seed(0)
    plain = UsesAppender()
    model = accelerate_model(UsesAppender(), backends=["SAME"])
    model.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3)
    memory = LockedAppender()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = model(x, memory)
    assert _accel_messages(record) == []
    assert len(memory.seen) == 1
    assert torch.equal(out, plain(x, Appender()))
    assert active_backend(model) == "SAME"


def test_autocast_on_a_model_without_parameters_runs() -> None:
    # A parameter-free module (a softmax head, a preprocessing step) has no parameter to
    # read the device from; it raised a bare StopIteration.
    model = accelerate_model(nn.Softmax(dim=-1), backends=["PYTORCH"], autocast="bf16")
    x = torch.randn(2, 3)
    out = model(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.softmax(x, -1), atol=1e-2, rtol=1e-2)


def test_the_onnxruntime_fallback_warning_keeps_its_whole_install_hint() -> None:
    try:
        import onnxruntime.training.ortmodule  # noqa: F401
    except Exception:
        pass
    else:
        pytest.skip("ONNX Runtime training imports here: the backend does not fall back")
    model = accelerate_model(nn.Linear(3, 2), backends=["ONNXRUNTIME"])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model(torch.randn(2, 3))
    (message,) = _accel_messages(record)
    assert "see docs/acceleration.md" in message
    assert message.endswith("continuing with 'PYTORCH'")


def test_a_very_long_backend_error_is_cut_and_says_where_the_rest_is() -> None:
    def build_verbose(fn, ctx):
        raise RuntimeError("x" * 5000)

    register_backend("VERBOSE", build_verbose)
    try:
        model = accelerate_model(nn.Linear(3, 2), backends=["VERBOSE"])
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            model(torch.randn(2, 3))
    finally:
        unregister_backend("VERBOSE")
    (message,) = _accel_messages(record)
    assert len(message) < 1300
    assert "engine_of(model).dropped" in message


class LeNet(nn.Module):
    """The classic tutorial CNN, which flattens with .view()."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 5)
        self.fc = nn.Linear(6 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(torch.relu(self.conv(x)), 3)
        return self.fc(x.view(-1, 6 * 4 * 4))


def test_a_view_broken_by_channels_last_says_which_option_did_it() -> None:
    model = accelerate_model(LeNet(), backends=["PYTORCH"], channels_last=True)
    with pytest.raises(RuntimeError, match=r"channels_last=True(.|\n)*\.reshape"):
        model(torch.randn(2, 3, 16, 16))
    # The same model without the option runs: the layout is what breaks .view().
    assert accelerate_model(LeNet(), backends=["PYTORCH"])(torch.randn(2, 3, 16, 16)).shape == (
        2,
        10,
    )


def test_auto_chooses_its_backends_again_when_the_model_moves_to_another_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AUTO picks backends per device (COMPILE on CUDA, eager on the CPU): a model called
    once on the CPU and then moved (``.cuda()``) gets the new device's choice, not the
    CPU's. Here the move is to the ``meta`` device, which needs no GPU."""
    from scramjet.accel import _engine, accelerate_model

    resolved: list[str] = []

    def per_device(device: torch.device) -> list[str]:
        resolved.append(device.type)
        return [_engine.EAGER]

    monkeypatch.setattr(_engine, "default_backends", per_device)
    model = accelerate_model(torch.nn.Linear(2, 2))
    model(torch.randn(1, 2))
    model(torch.randn(1, 2))
    model.to("meta")
    model(torch.randn(1, 2, device="meta"))
    assert resolved == ["cpu", "meta"]
