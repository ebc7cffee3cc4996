"""A dataset that shrinks after it was cached (a filtered list, a sliding window) is read at
its current length: an index past its end is the dataset's own IndexError, as uncached, not a
stale sample from the cache."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset

from scramjet.accel import CachedDataset


class Items(Dataset):
    def __init__(self) -> None:
        self.items = [torch.tensor(float(i)) for i in range(6)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.items[i]


def test_an_index_past_a_shrunk_dataset_is_its_index_error() -> None:
    raw = Items()
    ds = CachedDataset(raw, probe=False)
    try:
        assert [float(ds[i]) for i in range(6)] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        del raw.items[3:]
        assert len(ds) == 3
        with pytest.raises(IndexError):
            raw[4]
        with pytest.raises(IndexError):
            ds[4]
        with pytest.raises(IndexError):
            ds.__getitems__([0, 5])
        assert [float(ds[i]) for i in range(3)] == [0.0, 1.0, 2.0]
        assert float(ds[-1]) == 2.0
    finally:
        ds.close_cache()
