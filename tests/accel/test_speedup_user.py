"""A nebulgym user's probe: decorated models and datasets in less common, realistic settings."""

from __future__ import annotations

import copy
import io
import warnings

import torch
from torch import nn

from scramjet.accel import accelerate_model, engine_of
from scramjet.accel.backends import register_backend
from scramjet.compat.nebulgym import patch_torch_module


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 96)
        self.bn = nn.BatchNorm1d(96)
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(96, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(torch.relu(self.bn(self.fc(x)))))


_CALLS: list[int] = []


def _build_same_as_eager(forward_fn, ctx):
    """A non-eager backend that runs eager's forward and counts its calls."""

    def run(*args, **kwargs):
        _CALLS.append(1)
        return forward_fn(*args, **kwargs)

    return run


# Registered at import: decorators check backend names when they decorate.
register_backend("SAME_AS_EAGER", _build_same_as_eager, replace=True)


@patch_torch_module(patch_backprop=False)
class BaseNet(_Mlp):
    """A decorated model class, as a library (or an older script) ships it."""


@accelerate_model(backends=["SAME_AS_EAGER"])
class DerivedNet(BaseNet):
    """A user's subclass of it, decorated again with other backends."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * 2


def test_a_subclass_of_a_decorated_model_class_can_be_decorated_again() -> None:
    _CALLS.clear()
    torch.manual_seed(0)
    plain = _Mlp()
    torch.manual_seed(0)
    model = DerivedNet()
    x = torch.randn(16, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.manual_seed(1)
        out = model(x)  # was a RecursionError: each forward re-entered the engine
        out.sum().backward()
    torch.manual_seed(1)
    assert torch.equal(out, plain(x) * 2)
    assert _CALLS, "the outer decorator's backend runs the call"
    assert engine_of(model).active == "SAME_AS_EAGER"
    assert list(model.state_dict()) == list(plain.state_dict())
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    model.eval()
    for copied in (loaded, copy.deepcopy(model)):
        copied.eval()
        assert torch.equal(copied(x), model(x))


class _LazyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.LazyLinear(32)
        self.bn = nn.LazyBatchNorm1d()
        self.head = nn.LazyLinear(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bn(self.fc(x))))


@accelerate_model(backends=["SAME_AS_EAGER"])
class LazyNet(_LazyNet):
    """Lazy layers under a non-eager backend (COMPILE is the default on CUDA)."""


def test_a_model_with_lazy_layers_runs_its_first_call_eagerly_then_the_backend() -> None:
    x = torch.randn(6, 8)
    for make in (LazyNet, lambda: accelerate_model(_LazyNet(), backends=["SAME_AS_EAGER"])):
        torch.manual_seed(0)
        plain = _LazyNet()
        torch.manual_seed(0)
        model = make()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no backend dropped
            for _ in range(2):  # the first call used to fail snapshotting lazy buffers
                _CALLS.clear()
                torch.manual_seed(1)  # lazy layers draw their weights at the first call
                out = model(x)
                torch.manual_seed(1)
                assert torch.equal(out, plain(x))
                out.sum().backward()
        assert _CALLS and engine_of(model).active == "SAME_AS_EAGER"
        assert torch.equal(model.state_dict()["bn.running_mean"], plain.bn.running_mean)
