"""A boolean mask or an unordered container given as a batch index: refused with an error
that names what was passed and says how to select the rows it means."""

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
    """A pack of 6 samples (label = row)."""
    root = tmp_path_factory.mktemp("masks") / "imgs"
    names = write_images(root, 6, size=(8, 8))
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    dst = root.parent / "p.pack"
    pack(root, root / "list.csv", dst, dtype=["int64"], height=8, width=8,
         encode="raw", workers=0, progress=False)  # fmt: skip
    return dst


@pytest.mark.parametrize("transform", [None, lambda s: s], ids=["plain", "transform"])
def test_a_bool_tensor_mask_is_named_with_its_shape_and_the_fix(
    packed: Path, transform: Any
) -> None:
    ds = PackedDataset(packed, transform=transform)
    mask = torch.tensor([True, False, True, False, False, True])
    with pytest.raises(TypeError) as err:
        ds[mask]
    message = str(err.value)
    assert "bool Tensor" in message and "(6,)" in message, message
    assert "list of bool" not in message, message
    assert "nonzero" in message, message
    # the fix the message gives selects the rows the mask names
    assert ds[mask.nonzero().flatten()]["label"].tolist() == [0, 2, 5]


def test_a_bool_array_mask_is_named_with_its_shape_and_the_fix(packed: Path) -> None:
    ds = PackedDataset(packed)
    mask = np.arange(6) >= 4
    with pytest.raises(TypeError) as err:
        ds[mask]
    message = str(err.value)
    assert "bool ndarray" in message and "(6,)" in message, message
    assert "np.flatnonzero(mask)" in message, message
    assert ds[np.flatnonzero(mask)]["label"].tolist() == [4, 5]


@pytest.mark.parametrize("index", [{1: 2, 3: 4}, {1, 3}, frozenset({2})], ids=str)
def test_a_dict_or_set_index_is_refused_not_read_by_its_keys(packed: Path, index: Any) -> None:
    ds = PackedDataset(packed)
    with pytest.raises(TypeError, match=type(index).__name__) as err:
        ds[index]
    assert "sorted(" in str(err.value) or "list(" in str(err.value)
