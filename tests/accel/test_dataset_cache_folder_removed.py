"""A spill folder removed while the cache is filling (a temporary-file cleaner, an
``rm -rf /tmp/*``) closes the disk tier with one warning: every read still returns the dataset's
value, and later samples stay uncached, instead of a FileNotFoundError
out of ``dataset[i]``."""

from __future__ import annotations

import shutil

import pytest
import torch
from torch.utils.data import Dataset

from scramjet.accel import CachedDataset
from scramjet.accel._store import CacheWarning


class Ramp(Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((64,), float(i))


def test_a_spill_folder_removed_mid_epoch_is_not_a_crash() -> None:
    raw = Ramp()
    ds = CachedDataset(raw, max_memory_size=0, probe=False)
    try:
        store = ds._scramjet_cache.store
        assert store is not None
        for i in range(4):
            ds[i]
        assert store.spill_dir is not None
        shutil.rmtree(store.spill_dir)
        with pytest.warns(
            CacheWarning, match=r"disk tier cannot be written: .*No such file"
        ) as caught:
            for _ in range(2):
                for i in range(len(raw)):
                    torch.testing.assert_close(ds[i], raw[i], rtol=0, atol=0)
        assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    finally:
        ds.close_cache()
