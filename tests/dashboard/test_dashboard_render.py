"""Rendering: text curves, the golden screen at a fixed width, plain lines."""

from __future__ import annotations

import dataclasses
import io
import math
import os
from pathlib import Path

import pytest
from rich.console import Console

from scramjet.dashboard import Dashboard, moving_average, plain_lines, render, render_curve

GOLDEN = Path(__file__).parent / "golden" / "dashboard_w100.txt"
REGEN_ENV = "SCRAMJET_REGEN_GOLDEN"  # SCRAMJET_REGEN_GOLDEN=1 pytest tests/dashboard


def fixed_board() -> Dashboard:
    """A dashboard fed a fixed, deterministic history (durations make rates exact)."""
    board = Dashboard(
        window=3,
        divisor=8,
        span=60,
        file=io.StringIO(),
        format={"acc": ("percent", ".1f"), "lr": ("raw", ".0e"), "tag": ("inviz",)},
        curves=None,
    )
    mpe = 20
    for epoch in range(3):
        last = mpe if epoch < 2 else 12
        for mile in range(last):
            step = epoch * mpe + mile + 1
            loss = 2.0 / (1 + 0.1 * step) + 0.05 * math.sin(step)
            board.gauge(
                {"loss": loss, "lr": 0.01, "tag": 1.0},
                mile,
                epoch,
                mpe,
                "train",
                duration=0.02,
                samples=64,
            )
        if epoch < 2:
            for mile in range(5):
                board.gauge(
                    {"loss": 1.5 / (2 + epoch), "acc": 0.7 + 0.1 * epoch},
                    mile,
                    epoch,
                    5,
                    "test",
                    duration=0.01,
                    samples=128,
                )
    board.close()
    return board


def render_fixed(width: int = 100) -> str:
    snap = dataclasses.replace(fixed_board().snapshot(), memory="memory: CPU RSS 512.0 MiB")
    console = Console(
        width=width, record=True, file=io.StringIO(), force_terminal=True, color_system=None
    )
    console.print(render(snap, width))
    return console.export_text()


def test_golden_screen_at_width_100() -> None:
    text = render_fixed(100)
    if os.environ.get(REGEN_ENV) == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    expected = GOLDEN.read_text(encoding="utf-8")
    assert text == expected, f"dashboard output changed; rerun with {REGEN_ENV}=1 to accept"


def test_golden_content_is_what_was_fed() -> None:
    text = GOLDEN.read_text(encoding="utf-8")
    lines = text.splitlines()
    train = next(line for line in lines if line.startswith("train "))
    # 12 of 20 steps, 64 samples per 0.02 s = 3,200 samples/s, 8 steps at 50 steps/s left.
    assert "12/20" in train and "3,200 samples/s" in train and "ETA 0:00:00" in train
    test = next(line for line in lines if line.startswith("test "))
    assert "5/5" in test and "12,800 samples/s" in test and "done" in test
    assert "acc 80.0%" in text and "lr 1e-02" in text and "tag" not in text
    assert all(len(line) <= 100 for line in lines)
    assert "\x1b" not in text
    assert "• train" in text and "o test" in text


def test_layout_follows_width() -> None:
    narrow, wide = render_fixed(80), render_fixed(140)
    bar_len = [
        max(len(ln) for ln in t.splitlines() if ln.startswith("train")) for t in (narrow, wide)
    ]
    assert bar_len[0] <= 80 < bar_len[1] <= 140


def test_moving_average_and_bad_window() -> None:
    assert moving_average([1.0, 3.0, 5.0, 7.0], 3) == [1.0, 2.0, 3.0, 5.0]
    assert moving_average([1.0, math.nan, 3.0], 2) == [1.0, 1.0, 3.0]
    with pytest.raises(ValueError, match="window"):
        moving_average([1.0], 0)


def test_curve_geometry() -> None:
    rising = {"train": [(float(i), float(i)) for i in range(1, 11)]}
    lines = render_curve(rising, span=10, divisor=5)
    grid = [line.split("┤", 1)[1] for line in lines[:5]]
    assert len(grid) == 5 and all(len(row) == 10 for row in grid)
    assert grid[0][-1] == "•" and grid[-1][0] == "•"  # max top-right, min bottom-left
    assert lines[0].strip().startswith("10") and lines[4].strip().startswith("1 ")


def test_curve_span_keeps_last_steps_and_window_smooths() -> None:
    # x is epoch progress: 10 steps per epoch, 10 epochs
    pts = [(i / 10, 100.0 if i <= 50 else float(i % 2)) for i in range(1, 101)]
    last = render_curve({"train": pts}, span=20, divisor=4)
    assert "8.1" in last[-2] and "10" in last[-2]  # x axis covers the last 20 steps
    assert not any(line.strip().startswith("100") for line in last[:4])
    raw = render_curve({"train": pts}, span=20, divisor=4, window=1)
    smooth = render_curve({"train": pts}, span=20, divisor=4, window=2)
    rows = lambda ls: sum(1 for ln in ls[:4] if "•" in ln)  # noqa: E731
    assert rows(raw) == 2 and rows(smooth) == 1  # 0/1 alternation averages to 0.5


def test_curve_rejects_bad_axes_and_handles_empty() -> None:
    assert render_curve({"train": []}) == ["(no data yet)"]
    with pytest.raises(ValueError, match="span"):
        render_curve({"train": [(1.0, 1.0)]}, span=1)
    with pytest.raises(ValueError, match="divisor"):
        render_curve({"train": [(1.0, 1.0)]}, divisor=1)


def test_plain_lines_have_no_control_codes() -> None:
    lines = plain_lines(fixed_board().snapshot())
    assert [line.split()[0] for line in lines] == ["train", "test"]
    assert all("\x1b" not in line for line in lines)
    assert "epoch 3 12/20 | 3,200 samples/s" in lines[0]


def test_bad_arguments_are_explained() -> None:
    with pytest.raises(ValueError, match="divisor"):
        Dashboard(divisor=1)
    with pytest.raises(ValueError, match="kind must be one of"):
        Dashboard(format={"acc": ("percentage", ".1f")})
    with pytest.raises(TypeError, match="tailor"):
        Dashboard(format={"acc": ("tailor", ".1f")})
    with pytest.raises(ValueError, match="mpe"):
        Dashboard(file=io.StringIO()).gauge({"loss": 1.0}, mile=0, epoch=0, mpe=0, stage="t")
    # a step past the epoch's end was drawn as "6/4"
    with pytest.raises(ValueError, match=r"0 <= mile < mpe.*mile=5, mpe=4"):
        Dashboard(file=io.StringIO()).gauge({"loss": 1.0}, mile=5, epoch=0, mpe=4, stage="t")


def test_a_narrow_terminal_keeps_the_newest_points_of_a_curve() -> None:
    # span=60 does not fit in 40 columns: the curve is drawn with fewer points, ending at
    # the newest one, instead of being cropped on the right (which hid the newest points).
    board = Dashboard(span=60, divisor=5, file=io.StringIO(), show_memory=False)
    for mile in range(100):
        board.gauge({"loss": float(mile)}, mile, 0, 100, "train")  # a rising line
    board.close()
    for width in (40, 24):
        console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
        console.print(render(board.snapshot(), width))
        lines = console.export_text().splitlines()
        top = next(i for i, ln in enumerate(lines) if "┤" in ln)
        grid = lines[top : top + 5]
        assert all(len(ln) <= width for ln in grid), grid
        assert grid[0].split("┤")[0].strip() == "99"  # the y axis reaches the newest value
        assert grid[0].endswith("•"), grid  # and it is drawn in the last column
        assert lines[top + 6].split()[-1] == "1"  # the x axis ends at epoch 1.0 (step 100)


def test_a_curve_that_turns_nan_says_so_and_keeps_its_x_axis() -> None:
    # The loss diverges at step 7 of 10: the curve stops there, the x axis still reaches
    # the newest step, and a line says how many shown points are not drawn.
    pts = [(i / 10, 1.0 / i if i < 7 else math.nan) for i in range(1, 11)]
    lines = render_curve({"train": pts}, span=10, divisor=4, window=3)
    grid = [ln.split("┤", 1)[1] for ln in lines[:4]]
    assert ["".join(col).strip() != "" for col in zip(*grid)].count(True) == 6  # steps 1-6
    assert lines[5].split()[-1] == "1"  # x axis: 0.1 ... 1 (step 10)
    assert "4 of the last 10 points are NaN or infinite" in lines[-1]
    # Nothing finite at all: said as such, not "(no data yet)".
    diverged = render_curve({"train": [(0.5, math.nan), (1.0, math.inf)]}, span=10)
    assert diverged == ["(no finite value to draw: the last 2 points are NaN or infinite)"]
