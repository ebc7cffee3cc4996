"""A Tank that fails to open an npz file leaves none of its temporary HDF5 copies behind."""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.compat.nebulae.fuel import FuelGenerator, depot


def _npz_parts(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(6):
        Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(raw / f"{i}.png")
    rows = "".join(f"{i}.png,{i}\n" for i in range(6))
    (raw / "list.csv").write_text("image,label\n" + rows)
    fg = FuelGenerator(str(raw), "list.csv", ["int64"], False)
    dst = tmp_path / "train.npz"
    fg.generate(str(dst), 8, 8, encode="png", shards=2, progress=False, workers=0)
    return dst


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_an_unknown_column_leaves_no_copy(tmp_path: Path, temp_dir: Path) -> None:
    dst = _npz_parts(tmp_path)
    with pytest.raises(ValueError, match="unknown columns"):
        depot.Tank(str(dst), {"lable": "int64"}, batch_size=2)
    assert sorted(p.name for p in temp_dir.iterdir()) == []


def test_an_unreadable_second_part_leaves_no_copy_of_the_first(
    tmp_path: Path, temp_dir: Path
) -> None:
    dst = _npz_parts(tmp_path)
    second = tmp_path / "train_1.npz"
    with np.load(second, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    arrays["extra"] = np.array([{"a": 1}], dtype=object)  # unreadable without pickle
    np.savez(second, **arrays)
    with pytest.raises(ValueError, match="allow_pickle"):
        depot.Tank(str(dst), {"label": "int64"}, batch_size=2)
    assert sorted(p.name for p in temp_dir.iterdir()) == []


def test_a_tank_that_opens_keeps_its_copies_until_it_is_gone(
    tmp_path: Path, temp_dir: Path
) -> None:
    dst = _npz_parts(tmp_path)
    tank = depot.Tank(str(dst), {"label": "int64"}, batch_size=2, shuffle=False)
    assert tank.next()["label"].tolist() == [0, 1]
    assert len(list(temp_dir.iterdir())) == 2
    del tank
    gc.collect()
    assert sorted(p.name for p in temp_dir.iterdir()) == []
