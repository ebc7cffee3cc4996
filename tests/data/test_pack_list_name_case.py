"""A list written on a case-insensitive system (macOS, Windows) may name ``cat.png`` for
the file ``Cat.PNG``: on Linux that file is not found, and the error names the file that
differs only in case, so the user sees at once what to fix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.data import PackError, pack


def test_a_missing_name_names_the_file_that_differs_only_in_case(tmp_path: Path) -> None:
    (tmp_path / "pets").mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "pets" / "Cat.PNG", "PNG")
    (tmp_path / "list.csv").write_text("image,label\npets/cat.png,1\n")
    with pytest.raises(PackError) as err:
        pack(tmp_path, tmp_path / "list.csv", tmp_path / "out.pack", dtype=["int64"],
             height=4, width=4, workers=0, progress=False)  # fmt: skip
    message = str(err.value)
    assert "file not found" in message and "'pets/Cat.PNG'" in message, message


def test_no_hint_when_no_file_is_close(tmp_path: Path) -> None:
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "dog.png")
    (tmp_path / "list.csv").write_text("image,label\ncat.png,1\ndog.png,2\n")
    report = pack(tmp_path, tmp_path / "list.csv", tmp_path / "out.pack", dtype=["int64"],
                  height=4, width=4, workers=0, progress=False, on_error="skip")  # fmt: skip
    assert [s.reason for s in report.skipped] == [
        f"file not found under file_dir {str(tmp_path)!r}"
    ]
