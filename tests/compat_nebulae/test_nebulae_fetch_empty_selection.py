"""fetch_fn's data[column][[]] (an empty selection) keeps the column's dtype and item shape,
as an h5py dataset does, instead of giving a float64 array of shape (0,)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
from PIL import Image

from scramjet.compat.nebulae.fuel import FuelGenerator, depot


def test_an_empty_selection_keeps_the_columns_dtype_and_shape(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(4):
        Image.fromarray(np.full((10, 12, 3), 30 * i, np.uint8)).save(raw / f"{i}.png")
    rows = "".join(f"{i}.png,{i},{i / 2},name{i}\n" for i in range(4))
    (raw / "list.csv").write_text("image,label,score,name\n" + rows)
    dst = tmp_path / "train.hdf5"
    fg = FuelGenerator(str(raw), "list.csv", ["int64", "float32", "str"], False)
    fg.generate(str(dst), 8, 6, encode="png", progress=False, workers=0)
    seen: dict[str, Any] = {}

    def fetcher(data: Any, idx: int) -> dict[str, Any]:
        for name in ("image", "label", "score", "name"):
            seen[name] = data[name][[]]
            seen[name + "_slice"] = data[name][3:1]
        return {"label": data["label"][idx]}

    spec = {"image": "uint8", "label": "int64", "score": "float32", "name": "str"}
    depot.Tank(str(dst), spec, batch_size=1, shuffle=False, fetch_fn=fetcher).next()
    with h5py.File(dst, "r") as h5:
        for name in ("label", "score"):
            assert seen[name].dtype == h5[name].dtype, name
            assert seen[name].shape == (0,)
    for key in ("image", "image_slice"):
        assert seen[key].dtype == np.uint8
        assert seen[key].shape == (0, 8, 6, 3)
    assert seen["label_slice"].dtype == np.int64
    assert len(seen["name"]) == 0 and seen["name"].dtype.kind == "U"
