"""The PNG plot's legend names every stage, each in its line's colour: a stage named
``_val`` (or ``_``) was left out, as matplotlib hides labels that start with ``_``, and a
smoothed stage's average had another colour than its raw line."""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.colors import to_rgba

from scramjet.dashboard import Dashboard
from scramjet.dashboard._files import Row, plot_figure

STAGES = ("train", "val", "x_val", "_val", "_")


def _rows(epochs: int, per_epoch: int) -> list[Row]:
    return [
        (e + (m + 1) / per_epoch, e * per_epoch + m + 1, e, m, 1.0 / (1 + e * per_epoch + m))
        for e in range(epochs)
        for m in range(per_epoch)
    ]


def test_every_stage_is_in_the_legend() -> None:
    series = {s: _rows(3, 10 if s == "train" else 1) for s in STAGES}
    ax = plot_figure("loss", series, window=5).axes[0]
    legend = ax.get_legend()
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts == ["train (avg 5)", "val", "x_val", "_val", "_"], texts
    # each legend entry has the colour of its stage's line; train's raw line shares it
    colors = [to_rgba(h.get_color()) for h in legend.legend_handles]
    assert len(set(colors)) == len(STAGES), colors
    raw_train = ax.get_lines()[0]
    assert to_rgba(raw_train.get_color()) == colors[0]


def test_log_writes_the_plot_of_underscore_stages(tmp_path: Path) -> None:
    board = Dashboard(log_path=str(tmp_path), file=io.StringIO(), force_terminal=False)
    for epoch in range(2):
        for stage in STAGES:
            board.gauge({"loss": 1.0 / (epoch + 1)}, 0, epoch, 1, stage)
    board.close()
    board.log()
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
    text = (tmp_path / "loss.csv").read_text(encoding="utf-8")
    assert {line.split(",")[0] for line in text.splitlines()[1:]} == set(STAGES)
