"""A pack folder ``scramjet pack`` cannot create is named as the user gave it, not as the
hidden partial folder the pack is written into before it is published."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.cli import main


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_unwritable_pack_folder_is_named_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images = tmp_path / "images ü"
    images.mkdir()
    for i in range(3):
        Image.fromarray(np.full((6, 6, 3), i * 40, np.uint8)).save(images / f"{i}.png")
    listing = tmp_path / "list.csv"
    listing.write_text("path,label\n" + "".join(f"{i}.png,{i}\n" for i in range(3)))
    dst = "/proc/pack ü"  # passes the creatable check, refuses every new folder
    argv = ["pack", str(images), str(listing), dst, "--dtype", "int64"]
    assert main([*argv, "--height", "4", "--width", "4", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and repr(dst) in err and "partial" not in err
