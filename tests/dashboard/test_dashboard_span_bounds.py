"""``span`` (columns of a curve's x axis) is an int from 2 to ``MAX_SPAN``: a huge one
was taken as is and the first redraw built a grid of ``span`` columns per row, so
``Dashboard(span=10**9)`` ended in a MemoryError at ``close()``; a float or a string
was refused with a message saying neither the largest value nor what to pass."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from scramjet.dashboard import Dashboard, render, render_curve

MAX_SPAN = 10_000  # scramjet.dashboard._plot.MAX_SPAN

BAD_SPANS = [0, -5, 1, MAX_SPAN + 1, 10**9, 30.0, "30", True, None]


@pytest.mark.parametrize("span", BAD_SPANS)
def test_a_bad_span_is_a_clear_error_when_the_dashboard_is_built(span: object) -> None:
    with pytest.raises(ValueError) as caught:
        Dashboard(span=span, file=io.StringIO(), show_memory=False)  # type: ignore[arg-type]
    message = str(caught.value)
    assert f"span must be an int from 2 to {MAX_SPAN}" in message
    assert f"received {span!r}" in message and "e.g. span=30" in message


@pytest.mark.parametrize("span", BAD_SPANS)
def test_a_bad_span_is_the_same_error_in_render_curve(span: object) -> None:
    with pytest.raises(ValueError, match=f"span must be an int from 2 to {MAX_SPAN}"):
        render_curve({"train": [(1.0, 1.0), (2.0, 0.5)]}, span=span)  # type: ignore[arg-type]


def test_the_widest_span_draws_the_newest_points_that_fit_the_terminal() -> None:
    board = Dashboard(span=MAX_SPAN, divisor=4, file=io.StringIO(), show_memory=False)
    for mile in range(200):
        board.gauge({"loss": float(mile)}, mile, 0, 200, "train")  # a rising line
    board.close()
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(render(board.snapshot(), 80))
    lines = console.export_text().splitlines()
    top = next(i for i, ln in enumerate(lines) if "┤" in ln)
    grid = lines[top : top + 4]
    assert all(len(ln) <= 80 for ln in grid), grid
    assert grid[0].split("┤")[0].strip() == "199" and grid[0].endswith("•"), grid
    caption = lines[top - 1]
    shown = int(caption.split("last ")[1].split(" points")[0])
    assert 2 <= shown <= 80, caption
