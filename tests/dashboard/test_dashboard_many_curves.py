"""Hundreds of metrics on a terminal: only the curves that fit on the screen are drawn."""

from __future__ import annotations

import io
import time

from rich.console import Console

from scramjet.dashboard import Dashboard
from scramjet.dashboard._view import LiveView

METRICS = 300


def _board(file: io.StringIO) -> Dashboard:
    board = Dashboard(file=file, show_memory=False, force_terminal=True, refresh_per_second=1)
    for mile in range(20):
        board.gauge({f"m{i}": i * mile for i in range(METRICS)}, mile, 0, 20, "train")
    return board


def test_redraw_of_hundreds_of_curves_draws_only_the_screen() -> None:
    board = _board(io.StringIO())
    try:
        console = Console(file=io.StringIO(), width=100, height=40, force_terminal=True)
        view = LiveView(board.snapshot)
        started = time.perf_counter()
        lines = console.render_lines(view, console.options, pad=False)
        elapsed = time.perf_counter() - started
        text = "\n".join("".join(seg.text for seg in line) for line in lines)
        assert len(lines) < 150, f"{len(lines)} lines drawn for a 40-row terminal"
        assert "more curve(s) below the screen (40 rows)" in text
        assert "curves=[...]" in text
        assert elapsed < 0.1, f"one redraw took {elapsed * 1e3:.0f} ms"
    finally:
        board.close()


def test_last_frame_keeps_every_curve() -> None:
    out = io.StringIO()
    board = _board(out)
    board.close()
    text = out.getvalue()
    for i in (0, METRICS // 2, METRICS - 1):
        assert f"m{i}  (moving average" in text
    assert "below the screen" not in text.split("scramjet dashboard")[-1]
