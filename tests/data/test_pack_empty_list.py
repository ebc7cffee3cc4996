"""A CSV list with no rows, empty (0 bytes) or a header alone, is refused by ``pack`` and
``scramjet pack`` with the same ``PackError``: what the file holds, what a list needs,
and how to write one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.data import PackError, pack


@pytest.mark.parametrize(
    "text",
    [b"", b"\xef\xbb\xbf", b"image,label\n", b"image,label\n\n  \n", b"\n\n"],
    ids=["zero-bytes", "bom-only", "header-only", "header-and-blank-lines", "blank-lines"],
)
def test_a_list_without_rows_is_one_clear_pack_error(tmp_path: Path, text: bytes) -> None:
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "0.png")
    (tmp_path / "list.csv").write_bytes(text)
    with pytest.raises(PackError) as err:
        pack(tmp_path, tmp_path / "list.csv", tmp_path / "out.pack", dtype=["int64"],
             height=4, width=4, workers=0, progress=False)  # fmt: skip
    message = str(err.value)
    assert "list.csv" in message and "no rows" in message, message
    assert "image,label" in message or "image\tlabel" in message, message  # how to write one
    assert not (tmp_path / "out.pack").exists()


def test_the_cli_says_so_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "list.csv").write_bytes(b"")
    done = subprocess.run(
        [sys.executable, "-m", "scramjet", "pack", str(tmp_path), str(tmp_path / "list.csv"),
         str(tmp_path / "out.pack"), "--dtype", "int64", "--height", "4", "--width", "4"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no rows" in lines[0], done.stderr
