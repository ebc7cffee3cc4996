"""A metric whose values span more than a float (-1e308 .. 1e308, a run that blew up both
ways) made ``log()`` raise matplotlib's "arange: cannot compute length" and lose the plots
of every metric after it."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pytest

from scramjet.dashboard import Dashboard


@pytest.mark.parametrize("window", [1, 3])
def test_log_plots_a_metric_whose_range_overflows(window: int, tmp_path: Path) -> None:
    values = [1.0, -1e308, 1e308, 2.0]
    board = Dashboard(
        log_path=str(tmp_path), window=window, file=io.StringIO(), force_terminal=False
    )
    for mile, value in enumerate(values):
        board.gauge({"a_loss": value, "b_acc": 0.5}, mile, 0, len(values), "train")
    board.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warnings either
        board.log()
    for name in ("a_loss", "b_acc"):
        assert (tmp_path / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    rows = (tmp_path / "a_loss.csv").read_text().splitlines()[1:]
    assert [float(r.split(",")[-1]) for r in rows] == values
