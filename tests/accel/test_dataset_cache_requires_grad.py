"""A tensor the dataset returns with ``requires_grad=True`` comes back from the cache with it,
whether the cache holds it in memory or spilled to disk, as a leaf with the same values."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset

from scramjet.accel import CachedDataset


class Learnable(Dataset):
    """Even samples require grad (float and complex), odd ones do not."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        x = torch.linspace(0.0, 1.0, 6) + i
        z = torch.complex(x, -x)
        return {
            "x": x.requires_grad_(i % 2 == 0),
            "z": z.requires_grad_(i % 2 == 0),
            "label": torch.tensor(i),
        }


@pytest.mark.parametrize("memory", [None, 0], ids=["in_memory", "on_disk"])
def test_a_tensor_that_requires_grad_keeps_it_from_the_cache(memory: int | None) -> None:
    raw = Learnable()
    ds = CachedDataset(raw, max_memory_size=memory, probe=False)
    try:
        for _ in range(2):  # the first read decodes and stores, the second reads the cache
            for i in range(len(raw)):
                got, want = ds[i], raw[i]
                for key in ("x", "z"):
                    assert type(got[key]) is torch.Tensor
                    assert got[key].requires_grad == want[key].requires_grad, (key, i)
                    assert got[key].is_leaf
                    torch.testing.assert_close(
                        got[key].detach(), want[key].detach(), rtol=0, atol=0
                    )
                assert not got["label"].requires_grad
        tier = "in_memory" if memory is None else "on_disk"
        assert ds.cache_stats()[tier] == len(raw)
        loss = ds[0]["x"].sum()
        loss.backward()  # the sample is usable as a learnable input, as the dataset's was
    finally:
        ds.close_cache()
