"""A nebulgym user's view: decorate your own model and dataset classes, keep your loop."""

from __future__ import annotations

import copy
import pickle
import threading
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from scramjet.accel import accelerate_dataset, accelerate_model


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
