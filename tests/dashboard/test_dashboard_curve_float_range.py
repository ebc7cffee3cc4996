"""A terminal curve whose values span more than a float (a run that blew up) is drawn."""

from __future__ import annotations

import io

from scramjet.dashboard import Dashboard
from scramjet.dashboard._plot import render_curve


def test_close_draws_values_spanning_more_than_a_float() -> None:
    out = io.StringIO()
    board = Dashboard(file=out, force_terminal=True, show_memory=False, refresh_per_second=1)
    for mile, value in enumerate([-1e308, 1e308, 0.0]):
        board.gauge({"loss": value}, mile, 0, 3, "train")
    board.close()  # its last frame is drawn here, in the caller's thread
    text = out.getvalue()
    assert "1e+308 ┤" in text and "-1e+308 ┤" in text


def test_rows_and_labels_of_values_spanning_more_than_a_float() -> None:
    lines = render_curve({"train": [(1, -1e308), (2, 1e308), (3, 0.0)]}, span=3, divisor=5)
    assert [line.split("┤")[1] for line in lines[:5]] == [" • ", "   ", "  •", "   ", "•  "]
    assert [line.split("┤")[0].strip() for line in lines[:5]] == [
        "1e+308",
        "5e+307",
        "0",
        "-5e+307",
        "-1e+308",
    ]


def test_constant_near_the_largest_float_is_labelled_with_its_value() -> None:
    for value, row in ((1.7e308, 0), (-1.7e308, 4)):
        lines = render_curve({"train": [(1, value), (2, value)]}, span=2, divisor=5)
        label, cells = lines[row].split("┤")
        assert (float(label), cells) == (value, "••")
