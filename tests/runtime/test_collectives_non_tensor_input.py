"""gather() and reduce() given something that is not a tensor: a TypeError that names what
was received and what to use instead (checked before any collective, so alike on every rank)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from scramjet.runtime import gather, reduce


@pytest.mark.parametrize("value", [[1.0, 2.0], {"loss": torch.ones(1)}, 3.5, None, "text"])
def test_gather_of_a_non_tensor_is_a_type_error_naming_it(value: Any) -> None:
    with pytest.raises(
        TypeError, match=f"gather: expected a torch.Tensor, got {type(value).__name__}"
    ):
        gather(value)


@pytest.mark.parametrize("value", [{"loss": torch.ones(1)}, None, "text", [torch.ones(1), "a"]])
def test_reduce_of_a_non_number_is_a_type_error_naming_it(value: Any) -> None:
    with pytest.raises(
        TypeError, match=f"reduce: expected a tensor or a number, got {type(value).__name__}"
    ):
        reduce(value)


def test_numbers_and_lists_of_numbers_still_reduce() -> None:
    assert reduce(2.5).item() == 2.5
    assert reduce([1.0, 2.0], "sum").tolist() == [1.0, 2.0]
