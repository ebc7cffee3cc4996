"""A cached tensor comes back in the layout the dataset returned it in: channels-last images
stay channels-last (and a permuted view keeps its strides), an ``nn.Parameter`` stays one."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from scramjet.accel import CachedDataset


class Images(Dataset):
    """Channels-last 3x5x4 images (CHW shape, HWC in memory)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        hwc = torch.arange(60.0).view(5, 4, 3) + 100 * i
        return hwc.permute(2, 0, 1)


class Params(Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> nn.Parameter:
        return nn.Parameter(torch.full((3,), float(i)), requires_grad=i == 0)


def test_a_permuted_sample_keeps_its_strides_from_the_cache() -> None:
    raw = Images()
    ds = CachedDataset(raw, probe=False)
    try:
        for _ in range(2):  # first read (decoded) and second read (from the cache)
            for i in range(4):
                got = ds[i]
                torch.testing.assert_close(got, raw[i], rtol=0, atol=0)
                assert got.stride() == raw[i].stride()
        batch = next(iter(DataLoader(ds, batch_size=None, num_workers=0)))
        assert batch.stride() == raw[0].stride()
        image = ds[1].unsqueeze(0)
        assert image.is_contiguous(memory_format=torch.channels_last)
    finally:
        ds.close_cache()


def test_a_parameter_sample_stays_a_parameter() -> None:
    ds = CachedDataset(Params(), probe=False)
    try:
        for _ in range(2):
            first, second = ds[0], ds[1]
            assert type(first) is nn.Parameter and type(second) is nn.Parameter
            assert (first.requires_grad, second.requires_grad) == (True, False)
            torch.testing.assert_close(second.detach(), torch.ones(3))
    finally:
        ds.close_cache()
