"""``reduce_async`` given a Python number or a non-tensor: a number is reduced as
``reduce`` reduces it, and anything else is a TypeError that says what was received and
what to pass, instead of ``AttributeError: 'float' object has no attribute 'detach'``."""

from __future__ import annotations

import pytest
import torch

from scramjet.runtime.distributed import reduce, reduce_async


@pytest.mark.parametrize("value", [1.5, 3, [1.0, 2.0], torch.tensor([1, 2])])
def test_numbers_are_reduced_as_reduce_reduces_them(value: object) -> None:
    got = reduce_async(value, "mean").result()  # type: ignore[arg-type]
    assert torch.equal(got, reduce(value, "mean"))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["text", {"loss": 1.0}, None])
def test_a_non_number_is_a_type_error_that_says_what_to_pass(value: object) -> None:
    with pytest.raises(
        TypeError, match=rf"reduce_async: expected a tensor or a number, got {type(value).__name__}"
    ):
        reduce_async(value)  # type: ignore[arg-type]
