"""``accelerate_model`` refuses yes/no options that are not booleans (``"no"`` turned
sparse backprop and channels-last on), a negative ``Tolerance`` and a boolean
``preloaded_data``; the warning of a backend dropped inside ``recover_backward`` points
at the user's ``with`` line, not at contextlib."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from scramjet.accel import (
    CachedDataset,
    Tolerance,
    accelerate_model,
    recover_backward,
    register_backend,
)


@pytest.mark.parametrize(
    "option", [{"patch_backprop": "no"}, {"channels_last": "False"}, {"cuda_graphs": 1}]
)
def test_a_yes_no_option_that_is_not_a_boolean_is_refused(option: dict[str, Any]) -> None:
    ((name, value),) = option.items()
    with pytest.raises(TypeError, match=rf"{name} must be True or False.*{value!r}"):
        accelerate_model(nn.Linear(4, 2), backends=["PYTORCH"], **option)
    fine = accelerate_model(nn.Linear(4, 2), backends=["PYTORCH"], **{name: np.bool_(False)})
    fine(torch.randn(3, 4)).sum().backward()


@pytest.mark.parametrize("bound", ["rtol", "atol", "low_precision_rtol"])
def test_a_negative_tolerance_is_refused(bound: str) -> None:
    with pytest.raises(ValueError, match=rf"Tolerance\({bound}=-1\)"):
        Tolerance(**{bound: -1})


def test_a_boolean_preloaded_data_is_refused() -> None:
    with pytest.raises(ValueError, match="preloaded_data must be an int >= 0"):
        CachedDataset(list(range(4)), preloaded_data=True)


class _Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("backward failed")


def _fails_in_backward(forward: Any, context: Any) -> Any:
    calls = [0]

    def run(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        out = forward(*args, **kwargs)
        return _Boom.apply(out) if calls[0] >= 3 else out

    return run


def test_the_warning_of_a_backend_dropped_in_recover_backward_points_at_the_user() -> None:
    register_backend("FAILS_IN_BACKWARD", _fails_in_backward)
    fast = accelerate_model(nn.Linear(4, 2), backends=["FAILS_IN_BACKWARD"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(5, 4)
            try:
                fast(x).sum().backward()
            except RuntimeError as error:
                with recover_backward(fast, error):
                    fast(x).sum().backward()
    dropped = [w for w in caught if "dropped" in str(w.message)]
    assert dropped and all(w.filename == __file__ for w in dropped), [
        (w.filename, w.lineno) for w in caught
    ]
