"""The moving average of finite values whose sum overflows a float is still drawn."""

from __future__ import annotations

import io
from pathlib import Path

from scramjet.dashboard import Dashboard
from scramjet.dashboard._plot import moving_average, render_curve


def test_average_of_values_whose_sum_overflows() -> None:
    assert moving_average([1e308, 1.5e308, 1.7e308], 2) == [1e308, 1.25e308, 1.6e308]


def test_terminal_curve_draws_every_averaged_point(tmp_path: Path) -> None:
    board = Dashboard(file=io.StringIO(), show_memory=False, window=3, log_path=tmp_path)
    try:
        for mile in range(7):
            board.gauge({"loss": 1e308}, mile, 0, 7, "train")
        series = board.snapshot().curves["loss"]
    finally:
        board.close()
    lines = render_curve(series, span=8, divisor=3, window=3)
    assert lines[1].split("┤")[1].count("•") == 7
