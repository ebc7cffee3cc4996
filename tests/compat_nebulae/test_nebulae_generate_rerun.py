"""generate() again into the same path, with fewer shards, leaves no file of the earlier run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.compat.nebulae.fuel import FuelGenerator, depot


def _generator(tmp_path: Path, n: int = 4) -> FuelGenerator:
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(n):
        Image.fromarray(np.full((8, 8, 3), 20 * i, np.uint8)).save(raw / f"{i}.png")
    rows = "".join(f"{i}.png\t{i}\n" for i in range(n))
    (raw / "list.csv").write_text("image\tlabel\n" + rows)
    return FuelGenerator(str(raw), "list.csv", ["int64"], False)


def _labels(path: Path) -> list[int]:
    tank = depot.Tank(str(path), {"image": "uint8", "label": "int64"}, 1, shuffle=False)
    return [int(tank.next()["label"]) for _ in range(tank.MPE)]


@pytest.mark.parametrize(("first", "second"), [(3, 2), (3, 1), (4, 2)])
def test_a_rerun_with_fewer_shards_removes_the_earlier_runs_files(
    tmp_path: Path, first: int, second: int
) -> None:
    fg = _generator(tmp_path)
    dst = tmp_path / "train.hdf5"
    fg.generate(str(dst), 8, 8, encode="PNG", shards=first, progress=False, workers=0)
    fg.generate(str(dst), 8, 8, encode="PNG", shards=second, progress=False, workers=0)
    expected = ["train.hdf5"] if second == 1 else [f"train_{i}.hdf5" for i in range(second)]
    assert sorted(p.name for p in tmp_path.glob("train*")) == expected
    assert _labels(dst) == [0, 1, 2, 3]


def test_files_of_that_name_that_generate_did_not_write_are_kept(tmp_path: Path) -> None:
    fg = _generator(tmp_path)
    mine = tmp_path / "train_5.hdf5"
    mine.write_bytes(b"not a pack")
    other = tmp_path / "train_7.hdf5"  # a data set of its own, in one file
    fg.generate(str(other), 8, 8, encode="PNG", progress=False, workers=0)
    fg.generate(str(tmp_path / "train.hdf5"), 8, 8, encode="PNG", shards=2, progress=False)
    fg.generate(str(tmp_path / "train.hdf5"), 8, 8, encode="PNG", progress=False, workers=0)
    assert mine.read_bytes() == b"not a pack"
    assert _labels(other) == [0, 1, 2, 3]
