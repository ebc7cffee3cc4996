"""``format=`` that is not a dict, or a metric's entry that is neither a mode nor a pair,
is refused with an error naming what was received and showing the expected form (it
raised ``'NoneType' object is not iterable`` or ``'list' object has no attribute 'items'``)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from scramjet.compat.nebulae import DashBoard
from scramjet.dashboard import Dashboard


@pytest.mark.parametrize("cls", [Dashboard, DashBoard])
@pytest.mark.parametrize(
    "fmt", [[("acc", "raw")], "acc", {"acc": None}, {"acc": 3}, {"acc": {"raw": ".2f"}}]
)
def test_format_of_the_wrong_type_is_refused_clearly(cls: type[Dashboard], fmt: Any) -> None:
    with pytest.raises((TypeError, ValueError), match=r"format") as err:
        cls(format=fmt, file=io.StringIO(), force_terminal=False)
    assert "e.g." in str(err.value), err.value
    assert not isinstance(err.value, AttributeError)
