"""``PackedDataset(columns=...)``: a selection that reads nothing or names a column twice
is refused when the dataset is made, instead of loaders yielding empty or doubled batches."""

from __future__ import annotations

import pytest
from packdata_helpers import small_pack

from scramjet.data import PackedDataset


@pytest.fixture
def packed(folder, tmp_path):
    root, _ = folder
    small_pack(root, root / "list.csv", tmp_path / "p")
    return tmp_path / "p"


@pytest.mark.parametrize("columns", [[], (), set()])
def test_no_columns_is_refused(packed, columns):
    with pytest.raises(ValueError, match=r"columns=.* selects no column.*columns=None"):
        PackedDataset(packed, columns=columns)


def test_column_named_twice_is_refused(packed):
    with pytest.raises(ValueError, match=r"'image' more than once"):
        PackedDataset(packed, columns=["image", "label", "image"])


def test_selected_columns_keep_their_order(packed):
    ds = PackedDataset(packed, columns=["label", "image"])
    assert ds.column_names == ["label", "image"]
    assert list(ds[0]) == ["label", "image"]
    assert PackedDataset(packed, columns="label").column_names == ["label"]
    with pytest.raises(ValueError, match=r"unknown columns \['nope'\]"):
        PackedDataset(packed, columns=["nope"])


def test_a_set_of_columns_is_refused_for_its_order(packed):
    # Before: a set was taken, and its order (so the order of each sample's columns) follows
    # string hashing, which differs from process to process.
    with pytest.raises(TypeError, match=r"is a set.*pass a list"):
        PackedDataset(packed, columns={"image", "label"})
