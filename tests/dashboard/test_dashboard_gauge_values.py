"""``gauge()`` takes one number per metric; a batch of values is refused, not drawn as NaN."""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import pytest
import torch

from scramjet.compat.nebulae import DashBoard
from scramjet.dashboard import Dashboard


@pytest.mark.parametrize(
    "value",
    [torch.tensor([0.5, 0.7]), np.array([0.5, 0.7]), [0.5, 0.7], torch.ones(2, 3)],
    ids=["tensor", "array", "list", "matrix"],
)
@pytest.mark.parametrize("board_type", [Dashboard, DashBoard])
def test_a_metric_of_several_values_is_refused_with_what_to_pass(
    value: Any, board_type: type[Dashboard]
) -> None:
    board = board_type(file=io.StringIO(), show_memory=False)
    try:
        with pytest.raises(TypeError) as caught:
            board.gauge({"loss": 0.1, "acc": value}, 0, 0, 4, "train")
        message = str(caught.value)
        assert "'acc'" in message and ".mean()" in message
        assert " 2 values" in message or " 6 values" in message  # how many it received
        board.gauge({"loss": 0.2}, 0, 0, 4, "train")  # nothing of the refused call was kept
        snapshot = board.snapshot()
        assert "acc" not in snapshot.metrics["train"]
        assert snapshot.curves["loss"]["train"] == [(0.25, 0.2)]
    finally:
        board.close()


@pytest.mark.parametrize(
    "value", [torch.tensor([[0.25]]), np.array([0.25]), np.float32(0.25), 0.25, True]
)
def test_one_value_in_any_container_is_still_taken(value: Any) -> None:
    with Dashboard(file=io.StringIO(), show_memory=False) as board:
        board.gauge({"acc": value}, 0, 0, 4, "train")
        [(_, number)] = board.snapshot().curves["acc"]["train"]
    assert math.isclose(number, float(np.asarray(value).reshape(())))


def test_a_tailor_function_still_gets_the_values_it_shows() -> None:
    shown = {"acc": ("tailor", lambda v: "/".join(f"{x:.1f}" for x in v))}
    with Dashboard(file=io.StringIO(), show_memory=False, format=shown) as board:
        board.gauge({"acc": [0.5, 0.75]}, 0, 0, 4, "train")
        assert board.snapshot().metrics["train"]["acc"] == "0.5/0.8"
