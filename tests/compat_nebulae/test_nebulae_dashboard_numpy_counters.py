"""nebulae's DashBoard takes NumPy integers as its counters, as scramjet's Dashboard does."""

from __future__ import annotations

import io

import numpy as np
import pytest

from scramjet.compat.nebulae import DashBoard


def test_gauge_takes_a_numpy_interval_from_an_arange_loop() -> None:
    out = io.StringIO()
    with DashBoard(file=out, show_memory=False) as board:
        for mile in np.arange(6):
            board.gauge({"loss": 0.5}, mile, np.int64(0), np.int64(6), "train", np.int64(3))
    heads = [line.split(" | ")[0] for line in out.getvalue().splitlines()]
    assert heads == ["train epoch 1 3/6", "train epoch 1 6/6"]


@pytest.mark.parametrize("interval", [0, 2.0, True, "3"])
def test_gauge_still_refuses_an_interval_that_is_no_whole_number(interval: object) -> None:
    with (
        DashBoard(file=io.StringIO(), show_memory=False) as board,
        pytest.raises(ValueError, match="interval must be an int >= 1"),
    ):
        board.gauge({"loss": 0.5}, 0, 0, 6, "train", interval)  # type: ignore[arg-type]
