"""Indices of every kind on a PackedDataset, with and without a transform: the rows read
back are the rows packed, an empty index is an empty batch, and a 2-D index is refused
with an error that says what was received and what is accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from packdata_helpers import write_csv, write_images

from scramjet.data import PackedDataset, pack


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack of 12 samples (label = row) in 3 shards."""
    root = tmp_path_factory.mktemp("index") / "imgs"
    names = write_images(root, 12)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    dst = root.parent / "p.pack"
    pack(root, root / "list.csv", dst, dtype=["int64"], height=32, width=32,
         encode="raw", shards=3, workers=0, progress=False)  # fmt: skip
    return dst


def _same(sample: dict[str, Any]) -> dict[str, Any]:
    return sample


def _datasets(packed: Path) -> list[PackedDataset]:
    return [PackedDataset(packed), PackedDataset(packed, transform=_same)]


@pytest.mark.parametrize("transform", [False, True])
@pytest.mark.parametrize(
    "index",
    [[], np.array([], dtype=np.int64), torch.tensor([], dtype=torch.int64), slice(5, 5)],
    ids=["list", "array", "tensor", "slice"],
)
def test_an_empty_index_gives_an_empty_batch(packed: Path, transform: bool, index: Any) -> None:
    ds = _datasets(packed)[transform]
    batch = ds[index]
    assert set(batch) == {"image", "label"}
    assert len(batch["image"]) == len(batch["label"]) == 0


@pytest.mark.parametrize("transform", [False, True])
@pytest.mark.parametrize(
    "index", [np.array([[0, 1], [2, 3]]), torch.tensor([[0, 1], [2, 3]]), [[0, 1], [2, 3]]]
)
def test_a_two_dimensional_index_is_refused_naming_its_shape(
    packed: Path, transform: bool, index: Any
) -> None:
    ds = _datasets(packed)[transform]
    with pytest.raises(TypeError, match=r"1-D.*2-D.*shape \(2, 2\)") as err:
        ds[index]
    assert "np.ravel(index)" in str(err.value)


def test_a_ragged_nested_index_is_refused_without_claiming_a_shape(packed: Path) -> None:
    with pytest.raises(TypeError, match=r"2-D list of shape \(2, -1\)"):
        PackedDataset(packed)[[[0, 1], [2]]]


@pytest.mark.parametrize("transform", [False, True])
def test_every_index_kind_reads_the_rows_that_were_packed(packed: Path, transform: bool) -> None:
    ds = _datasets(packed)[transform]
    assert int(ds[3]["label"]) == 3 and int(ds[-1]["label"]) == 11
    assert int(ds[np.int64(4)]["label"]) == 4 and int(ds[torch.tensor(5)]["label"]) == 5
    wanted = [7, 0, 11, 3, 3, -2]
    for index in (wanted, np.array(wanted), torch.tensor(wanted), tuple(wanted)):
        assert ds[index]["label"].tolist() == [7, 0, 11, 3, 3, 10]
    assert ds[2:11:3]["label"].tolist() == [2, 5, 8]
    assert ds[::-4]["label"].tolist() == [11, 7, 3]
    with pytest.raises(TypeError, match=r"np\.flatnonzero"):
        ds[np.arange(12) % 2 == 0]
