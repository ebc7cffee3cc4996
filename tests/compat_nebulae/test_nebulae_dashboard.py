"""nebulae's DashBoard: the documented constructor, gauge() per step and epoch, log()."""

from __future__ import annotations

import io
from pathlib import Path

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
    assert len(loss_rows) == 1 + 2 * 6  # miles 0, 2, 4, 6, 8 and the last (9) per epoch
    text = out.getvalue()
    assert "train epoch 2 10/10 | 100 steps/s | done | loss 0.050" in text
    assert "test epoch 2 1/1" in text and "acc 60.0%" in text
