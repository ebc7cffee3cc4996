"""AIToolbox's EarlyStopping refuses a min_delta that would never stop, in its own words."""

from __future__ import annotations

import math

import pytest

from scramjet.compat.aitoolbox.torchtrain.callbacks.basic import EarlyStopping


@pytest.mark.parametrize("min_delta", [-0.01, math.nan, math.inf, "0.1"])
def test_a_bad_min_delta_is_named_as_min_delta(min_delta: object) -> None:
    with pytest.raises(ValueError) as caught:
        EarlyStopping(monitor="val_loss", min_delta=min_delta, patience=2)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith("EarlyStopping: min_delta must be a finite number ≥ 0")
    assert repr(min_delta) in message
    assert "early_stopping_threshold" not in message


def test_a_zero_or_positive_min_delta_is_taken() -> None:
    assert EarlyStopping(min_delta=0.0).min_delta == 0.0
    assert EarlyStopping(min_delta=0.5, patience=1).core.threshold == 0.5
