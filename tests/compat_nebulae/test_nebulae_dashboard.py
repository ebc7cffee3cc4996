"""nebulae's DashBoard: the documented constructor, gauge() per step and epoch, log()."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scramjet.compat.nebulae import DashBoard
from scramjet.dashboard import Dashboard


def test_dashboard_used_like_nebulae(tmp_path: Path) -> None:
    out = io.StringIO()
    db = DashBoard(
        log_path=str(tmp_path / "aerolog"),
        window=5,
        divisor=10,
        span=30,
        format={"acc": ("percent", ".1f"), "loss": ("raw", ".3f")},
        file=out,
    )
    assert isinstance(db, Dashboard)
    mpe = 10
    for epoch in range(2):
        for mile in range(mpe):
            db.gauge(
                {"loss": 1.0 / (1 + mile + epoch * mpe)},
                mile,
                epoch,
                mpe,
                "train",
                interval=2,
                duration=0.01,
            )
        db.gauge({"acc": 0.5 + 0.1 * epoch}, 0, epoch, 1, "test")
    db.log(gauge=True, tachograph=True, record="history.txt")
    db.close()
    names = sorted(p.name for p in (tmp_path / "aerolog").iterdir())
    assert names == ["acc.csv", "acc.png", "history.txt", "loss.csv", "loss.png"]
    loss_rows = (tmp_path / "aerolog" / "loss.csv").read_text().splitlines()
    assert len(loss_rows) == 1 + 2 * 10  # every mile is logged; interval thins printing
    text = out.getvalue()
    assert "train epoch 2 10/10 | 100 steps/s | done | loss 0.050" in text
    assert "test epoch 2 1/1" in text and "acc 60.0%" in text


# ----- format=: nebulae's (form, mode) pairs -----------------------------------------------
def test_nebulae_form_mode_pairs_are_accepted() -> None:
    out = io.StringIO()
    seen = []
    db = DashBoard(
        format={
            "loss": (".3f", "raw"),
            "acc": (".1f", "percent"),
            "share": (".2%", "raw"),
            "lr": (lambda v: f"{v:.0e}", "tailor"),
            "shot": (lambda *args: seen.append(args), "inviz"),
        },
        file=out,
        show_memory=False,
    )
    entry = {"loss": 0.12345, "acc": 0.5678, "share": 0.5, "lr": 0.001, "shot": "pixels"}
    db.gauge(entry, mile=3, epoch=1, mpe=4, stage="train")  # the epoch's last step
    db.close()
    line = out.getvalue().splitlines()[0]
    assert line.startswith("train epoch 2 4/4 | ")
    assert line.endswith("loss 0.123 · acc 56.8% · share 50.00% · lr 1e-03")  # no 'shot'
    assert seen == [("train", 2, 4, 4, "pixels")]  # nebulae counts epoch and mile from 1


def test_an_unknown_mode_names_the_four_modes() -> None:
    with pytest.raises(ValueError, match=r"raw, percent, tailor, inviz"):
        DashBoard(format={"acc": (".2%", "mean")}, file=io.StringIO())
    with pytest.raises(TypeError, match="needs a function"):
        DashBoard(format={"acc": (".2f", "tailor")}, file=io.StringIO())
    with pytest.raises(ValueError, match="not a number format"):
        DashBoard(format={"acc": ("%q", "raw")}, file=io.StringIO())


# ----- gauge(interval=N): a line every N calls ---------------------------------------------
@pytest.mark.parametrize(("interval", "expected"), [(5, [5, 10, 15, 20]), (1, list(range(1, 21)))])
def test_gauge_interval_decides_how_often_lines_are_printed(interval, expected) -> None:
    out = io.StringIO()  # not a terminal
    db = DashBoard(format={"loss": (".2f", "raw")}, file=out, show_memory=False)
    for mile in range(20):
        db.gauge({"loss": mile / 10}, mile, 0, 100, "train", interval=interval)
    lines = out.getvalue().splitlines()
    db.close()
    assert [line.split(" | ")[0] for line in lines] == [f"train epoch 1 {n}/100" for n in expected]
    assert lines[0].endswith(f"loss {(expected[0] - 1) / 10:.2f}")
