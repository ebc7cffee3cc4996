"""Settings of the dataset cache that a user can get wrong: ``spill``, ``max_memory_size=0``,
and ``cache_stats()`` once the cache is closed."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import Dataset

from scramjet.accel import CachedDataset, accelerate_dataset
from scramjet.accel._store import index_bytes


class Ramp(Dataset):
    """Sample ``i`` is a small float tensor filled with ``i``."""

    def __init__(self, n: int = 6) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((4,), float(i))


@pytest.mark.parametrize("spill", ["no", 0, None, "False"])
def test_a_spill_that_is_not_a_bool_is_refused(spill: object) -> None:
    with pytest.raises(TypeError, match=r"spill must be True .* or False .*got"):
        CachedDataset(Ramp(), max_memory_size=0, spill=spill, probe=False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="spill must be"):
        accelerate_dataset(spill=spill)  # type: ignore[arg-type]


def test_no_memory_without_spill_is_refused_as_caching_nothing() -> None:
    with pytest.raises(ValueError, match=r"max_memory_size=0 with spill=False caches nothing"):
        CachedDataset(Ramp(), max_memory_size=0, spill=False, probe=False)
    with pytest.raises(ValueError, match="caches nothing"):
        accelerate_dataset(max_memory_size=0, spill=False)


def test_no_memory_with_spill_is_a_disk_cache_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = CachedDataset(Ramp(), max_memory_size=0, probe=False)
    try:
        assert [float(ds[i][0]) for i in range(6)] == [float(i) for i in range(6)]
        stats = ds.cache_stats()
        assert (stats["in_memory"], stats["on_disk"], stats["memory_bytes"]) == (0, 6, 0)
        assert stats["disk_bytes"] > 0
    finally:
        ds.close_cache()


def test_cache_stats_after_close_cache_reports_nothing_cached() -> None:
    ds = CachedDataset(Ramp(), max_memory_size=index_bytes(6) + 64, probe=False)
    for i in range(6):
        ds[i]
    before = ds.cache_stats()
    assert before["in_memory"] + before["on_disk"] == 6 and before["on_disk"] > 0
    ds.close_cache()
    assert float(ds[1][0]) == 1.0  # still readable, uncached
    assert ds.cache_stats() == {
        "samples": 6,
        "in_memory": 0,
        "on_disk": 0,
        "memory_bytes": 0,
        "disk_bytes": 0,
    }
