"""A CSV header with a repeated, empty or '_'-prefixed column name is refused naming that
column, where it is, and how to rename it (not only the rule and the whole header)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.data import pack


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("image,label,label", ["'label' is the name of columns 2 and 3", "'label_2'"]),
        ("image,,x", ["column 2 has no name"]),
        ("image,_id", ["'_id' (column 2) starts with '_'", "'id'"]),
    ],
)
def test_a_bad_column_name_is_named_with_its_place_and_a_fix(
    tmp_path: Path, header: str, expected: list[str]
) -> None:
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "0.png")
    values = ",1" * header.count(",")
    (tmp_path / "list.csv").write_text(f"{header}\n0.png{values}\n")
    dtype = ["int64"] * header.count(",")
    with pytest.raises(ValueError) as err:
        pack(tmp_path, tmp_path / "list.csv", tmp_path / "o.pack", dtype=dtype, height=4,
             width=4, workers=0, progress=False)  # fmt: skip
    for part in expected:
        assert part in str(err.value), str(err.value)
