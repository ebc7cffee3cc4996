"""A nebulgym user's view: decorate your own model and dataset classes, keep your loop."""

from __future__ import annotations

import copy
import pickle
import threading
import warnings
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from scramjet.accel import CachedDataset, CacheWarning, accelerate_dataset, accelerate_model
from scramjet.accel._store import index_bytes


@accelerate_model(backends=["PYTORCH"])
class ModelWithALock(nn.Linear):
    """Leaves an unpicklable attribute out of its pickled state, as many models do."""

    def __init__(self) -> None:
        super().__init__(3, 2)
        self.lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop("lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.lock = threading.Lock()


def test_a_decorated_model_keeps_its_own_getstate_and_setstate() -> None:
    model = ModelWithALock()
    x = torch.ones(2, 3)
    expected = model(x)
    for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert type(clone) is ModelWithALock
        assert isinstance(clone.lock, type(threading.Lock()))
        torch.testing.assert_close(clone(x), expected, rtol=0, atol=0)


@accelerate_dataset(max_memory_size=1 << 20, transform=lambda s: s * 2)
class ReadsItsOwnShape(Dataset[torch.Tensor]):
    """Reads a sample in ``__init__`` to learn its feature size."""

    def __init__(self) -> None:
        self.x = torch.arange(30, dtype=torch.float32).view(10, 3)
        self.features = self[0].shape[-1]
        self.first = self[0]

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.x[i]


def test_a_decorated_dataset_may_index_itself_in_init() -> None:
    ds = ReadsItsOwnShape()
    assert ds.features == 3
    torch.testing.assert_close(ds.first, ds[0])  # the transform applies in __init__ too
    batches = list(DataLoader(ds, batch_size=4))
    torch.testing.assert_close(torch.cat(batches), ds.x * 2)


class Rows(Dataset[torch.Tensor]):
    def __init__(self, n: int = 200) -> None:
        self.x = torch.arange(n * 4, dtype=torch.float32).view(n, 4)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.x[i]


def test_a_budget_below_the_index_size_says_how_many_bytes_the_index_needs() -> None:
    needed = index_bytes(200)
    with pytest.warns(CacheWarning) as record:
        ds = CachedDataset(Rows(200), max_memory_size=7000)  # > 32 bytes x 200, < needed
    message = str(record[0].message)
    assert f"{needed} bytes" in message and "header" in message, message
    ds.close_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # the figure it gave is enough
        ds = CachedDataset(Rows(200), max_memory_size=needed + 200 * 256)
    ds[0]
    assert ds.cache_stats()["in_memory"] == 1
    ds.close_cache()


def test_a_dataset_stays_readable_after_close_cache_and_reads_it_uncached() -> None:
    rows = Rows(20)
    ds = CachedDataset(rows, max_memory_size=1 << 20)
    torch.testing.assert_close(ds[3], rows.x[3])
    ds.close_cache()
    rows.x += 100  # read from the dataset now, not from a cache
    torch.testing.assert_close(ds[3], rows.x[3])
    torch.testing.assert_close(torch.cat(list(DataLoader(ds, batch_size=8))), rows.x)
    assert ds.cache_stats()["in_memory"] == 0


def test_a_wrapped_model_pickles_after_module_compile() -> None:
    wrapped = accelerate_model(nn.Linear(3, 2), backends=["PYTORCH"])
    wrapped.compile()  # lazy: nothing is compiled until a call
    clone = pickle.loads(pickle.dumps(wrapped))
    x = torch.ones(2, 3)
    torch.testing.assert_close(clone.module(x), wrapped.module(x), rtol=0, atol=0)
    assert sorted(clone.state_dict()) == ["bias", "weight"]
