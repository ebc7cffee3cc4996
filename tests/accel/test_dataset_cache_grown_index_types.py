"""The once-only warning for a dataset that grew after its cache was made: it names a sample
position past the cached length whatever integer type the index has (an int, a NumPy
integer, a 0-d tensor, negative or not), and a bool index, which the cache does not take as
a position, reads what the dataset itself gives with no warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset, TensorDataset

from scramjet.accel import CachedDataset, CacheWarning


class Items(Dataset):
    def __init__(self, n: int) -> None:
        self.items = [torch.tensor([float(i)]) for i in range(n)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.items[i]


def _grown() -> tuple[Items, CachedDataset]:
    raw = Items(1)
    ds = CachedDataset(raw, probe=False)
    raw.items += [torch.tensor([10.0 + i]) for i in range(4)]  # 5 samples, 1 cached
    return raw, ds


def _grew_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, CacheWarning) and "grew" in str(w.message)
    ]


@pytest.mark.parametrize(
    "index", [4, np.int64(4), np.int32(-1), torch.tensor(3), torch.tensor(-2, dtype=torch.int32)]
)
def test_an_index_past_the_cached_length_warns_for_every_integer_type(index: object) -> None:
    raw, ds = _grown()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = ds[index]
        assert torch.equal(got, raw[index])  # type: ignore[index]
        assert len(_grew_warnings(caught)) == 1, [str(w.message) for w in caught]
    finally:
        ds.close_cache()


@pytest.mark.parametrize("index", [True, False, torch.tensor(True)])
def test_a_bool_index_is_the_datasets_own_reading_and_never_warns(index: object) -> None:
    raw, ds = _grown()  # a list takes True as 1 (past the cached 0), False as 0
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = ds[index]
        assert torch.equal(got, raw[index])  # type: ignore[index]
        assert _grew_warnings(caught) == []
    finally:
        ds.close_cache()


def test_a_negative_index_before_the_start_is_the_datasets_error_without_a_warning() -> None:
    _, ds = _grown()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(IndexError):
                ds[-6]
        assert _grew_warnings(caught) == []
    finally:
        ds.close_cache()


@pytest.mark.parametrize("index", [True, False])
def test_a_bool_index_into_a_tensor_dataset_is_its_mask_reading(index: bool) -> None:
    raw = TensorDataset(torch.arange(6.0).view(3, 2))
    ds = CachedDataset(raw, probe=False)
    try:
        (got,) = ds[index]
        (want,) = raw[index]
        assert got.shape == want.shape == ((1, 3, 2) if index else (0, 3, 2))
        assert torch.equal(got, want)
    finally:
        ds.close_cache()
