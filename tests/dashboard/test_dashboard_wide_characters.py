"""Stage names in wide characters (CJK: two terminal cells each) keep the layout."""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len
from rich.console import Console

from scramjet.dashboard import Dashboard
from scramjet.dashboard._view import render


def _screen(width: int) -> list[str]:
    board = Dashboard(file=io.StringIO(), show_memory=False, curves=[])
    for mile in range(3):
        board.gauge({"損失": 0.5}, mile, 0, 10, "訓練段階")
    board.gauge({"精度": 0.5}, 0, 0, 10, "eval")
    snapshot = board.snapshot()
    board.close()
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(render(snapshot, width))
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_progress_rows_of_wide_stage_names_stay_one_line_and_aligned(width: int) -> None:
    lines = _screen(width)
    rows = [line for line in lines if "epoch 1" in line]
    assert len(rows) == 2, f"a progress row was wrapped at width {width}: {lines}"
    assert all(cell_len(row) <= width for row in rows)
    # the bars start in the same terminal column
    starts = [cell_len(row[: row.index("█" if "█" in row else "░")]) for row in rows]
    assert starts[0] == starts[1], rows
