"""fetch_fn's data[column][()] reads the whole column, as h5py's ds[()] does (it gave an
empty array: the empty tuple was taken for an empty list of samples); a tuple indexes the
samples with its first item and each value with the rest; shape and dtype are there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from PIL import Image

from scramjet.compat.nebulae.fuel import FuelGenerator, depot


def test_whole_column_and_per_value_indexing_read_as_from_h5py(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(6):
        pixels = np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3) + 10 * i
        Image.fromarray(pixels).save(raw / f"{i}.png")
    (raw / "list.csv").write_text("image,label\n" + "".join(f"{i}.png,{i % 3}\n" for i in range(6)))
    dst = tmp_path / "train.hdf5"
    FuelGenerator(str(raw), "list.csv", ["int64"]).generate(str(dst), 8, 6, encode="png")
    seen: dict[str, Any] = {}

    def fetcher(data: Any, idx: int) -> dict[str, Any]:
        label, image = data["label"], data["image"]
        seen.update(
            labels=label[()],
            ellipsis=label[...],
            images=image[()],
            red=image[1:4, :, :, 0],
            pixel=image[2, 3, 4],
            green=image[..., 1],
            shape=image.shape,
            dtype=image.dtype,
            label_shape=label.shape,
            label_dtype=label.dtype,
        )
        return {"label": label[idx]}

    _fetch_once(dst, {"image": "uint8", "label": "int64"}, fetcher)
    with h5py.File(dst, "r") as h5:
        labels = h5["label"][()]
        assert seen["label_shape"] == h5["label"].shape and seen["label_dtype"] == h5["label"].dtype
    # the file holds PNG bytes; the column gives them decoded (lossless: the pixels written)
    images = np.stack([np.asarray(Image.open(raw / f"{i}.png")) for i in range(6)])
    assert seen["shape"] == images.shape and seen["dtype"] == np.uint8
    np.testing.assert_array_equal(seen["labels"], labels)
    np.testing.assert_array_equal(seen["ellipsis"], labels)
    assert seen["labels"].tolist() == [0, 1, 2, 0, 1, 2]
    np.testing.assert_array_equal(seen["images"], images)
    np.testing.assert_array_equal(seen["red"], images[1:4, :, :, 0])
    np.testing.assert_array_equal(seen["pixel"], images[2, 3, 4])
    np.testing.assert_array_equal(seen["green"], images[..., 1])


def test_a_ragged_column_is_not_indexed_along_its_values(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(3):
        Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(raw / f"{i}.png")
    (raw / "list.csv").write_text("image,tokens\n0.png,1 2\n1.png,3\n2.png,4 5 6\n")
    dst = tmp_path / "seq.hdf5"
    FuelGenerator(str(raw), "list.csv", ["vint64"]).generate(str(dst), 4, 4, encode="png")

    def fetcher(data: Any, idx: int) -> dict[str, Any]:
        tokens = data["tokens"]
        assert [t.tolist() for t in tokens[()]] == [[1, 2], [3], [4, 5, 6]]
        assert tokens.shape == (3,) and tokens.dtype == np.dtype(object)
        with pytest.raises(TypeError, match=r"differ in shape.*index each one"):
            tokens[:, 0]
        return {"label": idx}

    _fetch_once(dst, {"image": "uint8", "tokens": "vint64"}, fetcher)


def _fetch_once(dst: Path, spec: dict[str, str], fetcher: Any) -> None:
    """One batch of one sample through ``fetcher`` (which asserts what it reads)."""
    depot.Tank(str(dst), spec, batch_size=1, shuffle=False, fetch_fn=fetcher).next()
