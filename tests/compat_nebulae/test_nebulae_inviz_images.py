"""nebulae's 'inviz' metrics carry what the user's function shows (an image, say): they
are passed to it, and only single numbers are recorded."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import torch

from scramjet.compat.nebulae.aerolog import DashBoard


def test_an_inviz_image_is_not_recorded_as_a_column_of_nan(tmp_path: Path) -> None:
    shown: list[tuple[int, ...]] = []
    db = DashBoard(
        log_path=str(tmp_path / "aero"),
        format={
            "loss": (".3f", "raw"),
            "img": (lambda *a: shown.append(a[-1].shape), "inviz"),
            "gain": (lambda *a: None, "inviz"),
        },
        file=io.StringIO(),
        show_memory=False,
    )
    for mile in range(3):
        entry = {"loss": 0.5, "img": np.zeros((4, 4, 3)), "gain": torch.tensor(0.25)}
        db.gauge(entry, mile=mile, epoch=0, mpe=3, stage="train")
    db.log()
    db.close()
    assert shown == [(4, 4, 3)] * 3
    files = sorted(p.name for p in (tmp_path / "aero").iterdir())
    # before: img.csv held 'nan' on every row and img.png plotted nothing
    assert not [name for name in files if name.startswith("img")], files
    gain = (tmp_path / "aero" / "gain.csv").read_text().splitlines()
    assert [row.split(",")[-1] for row in gain[1:]] == ["0.25"] * 3  # a number is kept
