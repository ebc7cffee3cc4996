"""EarlyStoppingCallback's patience: a whole number of epochs ≥ 1, refused otherwise with
an error that says what 1 means (Keras' and AIToolbox's patience=0)."""

from __future__ import annotations

import pytest

from scramjet.callbacks import EarlyStoppingCallback


@pytest.mark.parametrize("patience", ["3", 1.5, None, True, 0, -2])
def test_a_patience_that_is_not_a_whole_number_of_epochs_is_refused(patience: object) -> None:
    with pytest.raises(ValueError, match=r"early_stopping_patience.*whole number ≥ 1") as info:
        EarlyStoppingCallback(early_stopping_patience=patience)  # type: ignore[arg-type]
    message = str(info.value)
    assert f"received {patience!r}" in message
    assert "first epoch without improvement" in message, "says what to pass for patience 0"


def test_a_numpy_integer_patience_is_taken() -> None:
    np = pytest.importorskip("numpy")
    assert EarlyStoppingCallback(early_stopping_patience=np.int64(2)).patience == 2
