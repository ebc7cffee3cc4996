"""A sample holding a view with gaps (``x[:, ::2]``) or an expanded tensor (``x.expand``,
stride 0) comes back from the cache with the strides the dataset returned it with, as the
uncached dataset gives it, not contiguous; in memory or spilled to disk, alone or mixed with
channels-last and permuted layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import Dataset

from scramjet.accel import CachedDataset


def _views(i: int) -> dict[str, torch.Tensor]:
    base = torch.arange(2 * 6 * 8, dtype=torch.float32).view(2, 6, 8) + 1000 * i
    cl = torch.arange(24.0).view(1, 2, 3, 4).to(memory_format=torch.channels_last) + i
    return {
        "gaps": base[:, ::2, 1::3],
        "gaps_transposed": base[0, ::2].t(),
        "expanded": torch.arange(3.0).add(i).expand(4, 3),
        "expanded_permuted": base[:, :1].expand(2, 5, 8).permute(2, 0, 1),
        "channels_last_cropped": cl[:, :, 1:, ::2],
        "int_gaps": torch.arange(40, dtype=torch.int16).view(5, 8)[::2, ::4] + i,
        "grad_expanded": torch.ones(3).add(i).expand(2, 3).detach().requires_grad_(),
    }


class Views(Dataset):
    def __len__(self) -> int:
        return 3

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return _views(i)


def _check(ds: CachedDataset, raw: Views) -> None:
    for _ in range(2):  # first read (decoded) and second read (from the cache)
        for i in range(len(raw)):
            got, want = ds[i], raw[i]
            for key, expected in want.items():
                assert got[key].stride() == expected.stride(), key
                assert got[key].shape == expected.shape, key
                assert got[key].dtype == expected.dtype, key
                assert got[key].requires_grad == expected.requires_grad, key
                torch.testing.assert_close(got[key], expected, rtol=0, atol=0)


@pytest.mark.parametrize("on_disk", [False, True])
def test_views_with_gaps_or_expanded_keep_their_strides(on_disk: bool, tmp_path: Path) -> None:
    raw = Views()
    settings = {"max_memory_size": 0, "spill": True, "cache_dir": str(tmp_path)}
    ds = CachedDataset(raw, probe=False, **(settings if on_disk else {}))
    try:
        _check(ds, raw)
        stats = ds.cache_stats()
        assert stats["on_disk" if on_disk else "in_memory"] == len(raw)
    finally:
        ds.close_cache()


def test_an_expanded_sample_is_stored_once_not_per_repeat() -> None:
    class Wide(Dataset):
        def __len__(self) -> int:
            return 1

        def __getitem__(self, i: int) -> torch.Tensor:
            return torch.arange(256.0).expand(4096, 256)  # 4 MiB as a contiguous tensor

    ds = CachedDataset(Wide(), probe=False)
    try:
        got = ds[0]
        assert ds[0].stride() == (0, 1)
        torch.testing.assert_close(got, Wide()[0], rtol=0, atol=0)
        assert ds.cache_stats()["memory_bytes"] < 64 * 1024
    finally:
        ds.close_cache()
