"""Metric and stage names with ``$`` are plotted as written, never parsed as math text
(``$\\foo$`` made ``log()`` raise matplotlib's ParseFatalException)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scramjet.dashboard import Dashboard


@pytest.mark.parametrize("name", ["$\\foo$", "cost $x^{2$", "p$_{x}$"])
def test_log_writes_the_plot_of_a_name_with_dollars(name: str, tmp_path: Path) -> None:
    board = Dashboard(log_path=str(tmp_path), file=io.StringIO(), force_terminal=False)
    for mile in range(2):
        board.gauge({name: 0.5 + mile}, mile, 0, 2, "$\\bad$ stage")
    board.close()
    board.log()
    pngs = list(tmp_path.glob("*.png"))
    assert len(pngs) == 1 and pngs[0].read_bytes()[:4] == b"\x89PNG"
    assert "$\\bad$ stage" in next(tmp_path.glob("*.csv")).read_text(encoding="utf-8")
