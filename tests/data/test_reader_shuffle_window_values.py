"""``PackedDataset(shuffle_window=...)`` takes a whole number of shards >= 1 (or None), as
``prefetch`` does: a fraction is not rounded down in silence and a string is not parsed."""

from __future__ import annotations

import numpy as np
import pytest
from packdata_helpers import small_pack

from scramjet.data import PackedDataset


@pytest.fixture
def packed(folder, tmp_path):
    root, _ = folder
    small_pack(root, root / "list.csv", tmp_path / "p")
    return tmp_path / "p"


@pytest.mark.parametrize("window", [2.5, "8", "abc", float("nan"), True, 0, -3])
def test_values_that_are_not_a_count_of_shards_are_refused(packed, window):
    with pytest.raises(ValueError, match=r"shuffle_window must be a whole number of shards"):
        PackedDataset(packed, shuffle_window=window)


@pytest.mark.parametrize("window", [1, 3, np.int64(2)])
def test_whole_numbers_are_kept(packed, window):
    ds = PackedDataset(packed, shuffle_window=window)
    assert ds.shuffle_window == int(window) and type(ds.shuffle_window) is int
    assert PackedDataset(packed).shuffle_window is None
