"""A practitioner's checks of ``accelerate_dataset`` / ``CachedDataset``: values, lifetimes,
workers and class decoration, as the acceleration docs describe them."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

from scramjet.accel import CachedDataset


class Ramp(Dataset):
    """Sample ``i`` is a small float tensor filled with ``i``."""

    def __init__(self, n: int = 48) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((4,), float(i))


def _expected(n: int) -> torch.Tensor:
    return torch.arange(float(n)).repeat_interleave(4).view(n, 4)


def test_close_cache_keeps_persistent_workers_serving_an_incomplete_cache():
    ds = CachedDataset(Ramp(48))
    loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    batches = iter(loader)
    next(batches)  # the cache is only partly filled
    del batches
    ds.close_cache()  # documented: the dataset stays usable, read uncached from then on
    assert torch.equal(torch.cat(list(loader)), _expected(48))
    assert torch.equal(torch.cat(list(loader)), _expected(48))

