"""nebulgym's ``@accelerate_model(patch_backprop, reduce_memory, backends=...)`` call.

nebulgym's signature is ``accelerate_model(patch_backprop=True, reduce_memory=False,
**nebulgym_kwargs)`` with ``backends`` among the keywords, so its second positional
argument and ``backends=`` can be given together.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import scramjet.compat.nebulgym as ng
from scramjet.accel import AccelerationWarning, active_backend


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
        self.head = torch.nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _grads(cls: type[torch.nn.Module]) -> list[torch.Tensor]:
    torch.manual_seed(0)
    net = cls()
    net(torch.randn(4, 8)).square().sum().backward()
    return [p.grad.clone() for p in net.parameters() if p.grad is not None]


@pytest.mark.parametrize("decorator", [ng.accelerate_model, ng.patch_torch_module])
def test_positional_flags_with_backends_keyword(decorator) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccelerationWarning)
        decorated = decorator(False, False, backends=["PYTORCH"])(_Net)
        got = _grads(decorated)
    for g, want in zip(got, _grads(_Net), strict=True):
        torch.testing.assert_close(g, want, rtol=0, atol=0)
    net = decorated()
    net(torch.randn(2, 8))
    assert active_backend(net) == "PYTORCH"


def test_positional_reduce_memory_true_with_backends_keyword_warns_once() -> None:
    with pytest.warns(AccelerationWarning, match="reduce_memory=True") as caught:
        decorated = ng.accelerate_model(True, True, backends=["PYTORCH"])(_Net)
    assert len([w for w in caught if "reduce_memory" in str(w.message)]) == 1
    assert decorated()(torch.randn(3, 8)).shape == (3, 2)


@pytest.mark.parametrize("decorator", [ng.accelerate_model, ng.patch_torch_module])
@pytest.mark.parametrize("keyword", [True, False])
def test_reduce_memory_given_twice_is_a_type_error(decorator, keyword: bool) -> None:
    # nebulgym: Python's "got multiple values for argument 'reduce_memory'"; before, True
    # and True warned twice and True then False silently kept the positional one.
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccelerationWarning)
        with pytest.raises(TypeError, match="reduce_memory given twice"):
            decorator(True, True, reduce_memory=keyword)


def test_reduce_memory_by_keyword_still_warns_with_backends_first() -> None:
    with pytest.warns(AccelerationWarning, match="reduce_memory=True"):
        decorated = ng.accelerate_model(["PYTORCH"], reduce_memory=True)(_Net)
    assert decorated()(torch.randn(3, 8)).shape == (3, 2)


def test_backends_given_twice_names_both() -> None:
    with pytest.raises(TypeError, match=r"backends.*twice|twice.*backends"):
        ng.accelerate_model(True, ["PYTORCH"], backends=["COMPILE"])


def test_backends_given_twice_positionally_names_both() -> None:
    with pytest.raises(TypeError, match=r"backends given twice, as the second argument"):
        ng.accelerate_model(True, ["PYTORCH"], ["COMPILE"])


def test_patch_backprop_given_twice_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"patch_backprop given twice.*first argument"):
        ng.patch_torch_module(False, patch_backprop=True)


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((True, False, ["PYTORCH"]), {}),  # nebulgym's order, backends third
        ((True, ["PYTORCH"]), {"reduce_memory": False}),  # earlier (patch_backprop, backends)
        ((["PYTORCH"], True), {"reduce_memory": False}),  # earlier (backends, patch_backprop)
        ((["PYTORCH"],), {"patch_backprop": True}),
        ((True, None), {"backends": ["PYTORCH"]}),
    ],
)
def test_every_call_form_reads_the_same(args, kwargs) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccelerationWarning)
        decorated = ng.accelerate_model(*args, **kwargs)(_Net)
    net = decorated()
    net(torch.randn(2, 8))
    assert active_backend(net) == "PYTORCH"


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((True,), {"backends": True}, r"backends must be backend names.*reduce_memory=True"),
        ((True, 1), {}, r"reduce_memory .* must be True or False; received 1"),
        ((), {"backend": ["PYTORCH"]}, r"unexpected keyword argument 'backend'"),
        ((True, False, ["PYTORCH"], 1), {}, r"at most 3 positional arguments"),
        ((["PYTORCH"], True, None), {}, r"backend names first .* patch_backprop only"),
    ],
)
def test_bad_arguments_say_what_was_expected(args, kwargs, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        ng.accelerate_model(*args, **kwargs)
