"""A dataset that shrinks after it was cached (a filtered list, a sliding window) is read at
its current length: an index past its end is the dataset's own IndexError, as uncached, not a
stale sample from the cache. One that grew is read uncached past its cached length, with one
warning that says so."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import Dataset

from scramjet.accel import CachedDataset, CacheWarning


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


def test_a_dataset_that_grew_warns_once_that_the_new_samples_are_uncached() -> None:
    raw = Items()
    ds = CachedDataset(raw, probe=False)
    try:
        raw.items.append(torch.tensor(6.0))
        raw.items.append(torch.tensor(7.0))
        with pytest.warns(CacheWarning, match=r"grew from 6 to 8 samples") as caught:
            assert float(ds[6]) == 6.0
        assert len(caught) == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert [float(x) for x in ds.__getitems__([7, 0])] == [7.0, 0.0]
            assert float(ds[5]) == 5.0
        assert ds.cache_stats()["in_memory"] == 2  # indices 0 and 5 cached, 6 and 7 not
    finally:
        ds.close_cache()
