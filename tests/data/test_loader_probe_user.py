"""A user's view of ``PackedDataset.loader``: a hand-written mid-epoch resume, a shard
changed on disk while it is read, and settings of the wrong type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from scramjet.data import PackedDataset, pack


@pytest.fixture
def ds(folder: tuple[Path, Any], tmp_path: Path) -> PackedDataset:
    root, _ = folder
    pack(
        root, root / "list.csv", tmp_path / "p.pack", dtype=["int64"], height=32, width=40,
        encode="raw", shards=3, workers=0, progress=False,
    )  # fmt: skip
    return PackedDataset(tmp_path / "p.pack")


def labels_and_pixels(loader: Any) -> list[tuple[int, int]]:
    return [(int(y), int(x[0, 0, 0])) for b in loader for x, y in zip(b["image"], b["label"])]


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_a_resumed_epoch_skips_its_start_and_the_next_epoch_is_whole(
    ds: PackedDataset, backend: str
) -> None:
    def make() -> Any:
        g = torch.Generator().manual_seed(3)
        return ds.loader(4, shuffle=True, generator=g, backend=backend, num_workers=0)

    full = make()
    full.sampler.set_epoch(1)
    epoch1 = labels_and_pixels(full)
    full.sampler.set_epoch(2)
    epoch2 = labels_and_pixels(full)

    resumed = make()
    resumed.sampler.set_epoch(1)
    resumed.sampler.set_start(4)  # one batch of 4 was consumed before the interruption
    assert len(resumed) == 2
    assert labels_and_pixels(resumed) == epoch1[4:]
    resumed.sampler.set_epoch(2)
    assert len(resumed) == 3
    assert labels_and_pixels(resumed) == epoch2  # the skip was for the resumed epoch only
    assert len(labels_and_pixels(resumed)) == 12  # and for one iteration, set_epoch or not
