"""A value with no finite neighbour (logged once between NaNs, the one finite value of a
series) is drawn in the PNG plot whatever the series' length: markers were drawn only on
series of fewer than 50 points, and a line has no segment at a lone point, so in a
longer series such a value was not in the PNG at all. Long lines get no other markers.
Checked on the PNG's pixels: the line's colour at the point's place."""

from __future__ import annotations

import io
import math

import pytest
from matplotlib.colors import to_rgb
from PIL import Image

from scramjet.dashboard._files import Row, plot_figure, png_bytes

NAN = math.nan
LONE = 50  # index of the lone value (y = 0.5), 10 points after the line ends


def _rows(values: list[float]) -> list[Row]:
    """100 points per epoch (averaged when ``window > 1``), from epoch progress 1.01."""
    return [(1 + (i + 1) / 100, i + 1, 1, i, v) for i, v in enumerate(values)]


def _series(length: int) -> list[float]:
    """A line over the first 40 points, NaN after it but for one value at ``LONE``."""
    values = [i / 39 for i in range(40)] + [NAN] * (length - 40)
    values[LONE] = 0.5
    return values


def _colour_near(png: bytes, centre: tuple[float, float], colour: str, radius: int = 4) -> int:
    """Pixels within ``radius`` of ``centre`` (display coordinates) close to ``colour``."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    want = [round(c * 255) for c in to_rgb(colour)]
    x, y = round(centre[0]), image.height - round(centre[1])
    return sum(
        1
        for i in range(x - radius, x + radius + 1)
        for j in range(y - radius, y + radius + 1)
        if all(abs(a - b) <= 30 for a, b in zip(image.getpixel((i, j)), want))
    )


@pytest.mark.parametrize("length", [60, 200, 1000])
@pytest.mark.parametrize("window", [1, 5])
def test_a_lone_value_of_a_long_series_is_drawn(length: int, window: int) -> None:
    series = {"train": _rows(_series(length))}
    png = png_bytes("loss", series, window)
    figure = plot_figure("loss", series, window)
    figure.tight_layout()  # as png_bytes lays it out
    ax = figure.axes[0]
    point = series["train"][LONE]
    centre = ax.transData.transform((point[0], point[4]))
    colour = ax.get_lines()[-1].get_color()  # the stage's colour (the average's too)
    assert _colour_near(png, centre, colour) >= 9, (length, window)
    # the long line is not cluttered: its other points have no marker
    assert all(list(line.get_markevery()) == [LONE] for line in ax.get_lines())


def test_a_series_with_one_finite_value_is_drawn() -> None:
    values = [NAN] * 80
    values[30] = 2.0
    series = {"val": _rows(values)}
    png = png_bytes("acc", series, 1)
    figure = plot_figure("acc", series, 1)
    figure.tight_layout()
    ax = figure.axes[0]
    centre = ax.transData.transform((series["val"][30][0], 2.0))
    assert _colour_near(png, centre, ax.get_lines()[0].get_color()) >= 9


def test_a_short_series_keeps_a_marker_on_every_point() -> None:
    series = {"train": _rows([float(i) for i in range(10)])}
    (line,) = plot_figure("loss", series, 1).axes[0].get_lines()
    assert line.get_marker() == "o" and line.get_markevery() is None
