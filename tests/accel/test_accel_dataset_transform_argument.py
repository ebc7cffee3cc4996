"""A ``transform=`` that cannot be called is refused where it is given, not at the first
sample read in a DataLoader worker."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from scramjet.accel import CachedDataset, accelerate_dataset


def _flip(x: torch.Tensor) -> torch.Tensor:
    return x.flip(-1)


def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


class Rows(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.arange(3.0) + i


@pytest.mark.parametrize("transform", [[_flip, _double], (_flip,), "flip", 3])
def test_cached_dataset_refuses_a_transform_that_is_not_callable(transform: Any) -> None:
    with pytest.raises(TypeError, match=r"transform must be a callable") as info:
        CachedDataset(Rows(), transform=transform)
    assert type(transform).__name__ in str(info.value)
    assert "lambda" in str(info.value)  # says how to chain several


def test_accelerate_dataset_refuses_a_list_of_transforms_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"transform must be a callable.*got list"):
        accelerate_dataset(transform=[_flip, _double])


def test_callable_transforms_still_run_after_the_cache() -> None:
    cached = CachedDataset(Rows(), transform=lambda x: _double(_flip(x)))
    for _ in range(2):
        got = torch.cat(list(DataLoader(cached, batch_size=2)))
        assert torch.equal(
            got, torch.stack([(torch.arange(3.0) + i).flip(-1) * 2 for i in range(4)])
        )
