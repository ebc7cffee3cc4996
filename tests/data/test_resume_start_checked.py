"""A resume position given to ``set_start`` is checked, the same way in every sampler that
takes one: a whole number >= 0, where a start at or past the epoch's end is an empty
epoch (the Trainer counts whole batches, so a resume after a last, partial batch lands a
little past the end); negative, fractional or bool positions raise instead of being
clamped or rounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.data.packdata_helpers import photo_folder, small_pack
from torch.utils.data import BatchSampler, SequentialSampler

from scramjet.data import PackedDataset
from scramjet.data._threads import EpochOrder
from scramjet.trainer.samplers import EpochSampler, SkipBatches, SkipSampler

NAMES = ["EpochOrder", "EpochSampler", "SkipSampler", "SkipBatches"]
BAD: list[tuple[object, type[Exception], str]] = [
    (-1, ValueError, r"set_start got -1\b.*>= 0"),
    (2.5, TypeError, r"set_start .*got 2\.5 \(float\)"),
    (True, TypeError, r"set_start .*got True \(bool\)"),
    ("3", TypeError, r"set_start .*got '3' \(str\)"),
]


def samplers() -> dict[str, Any]:
    data = list(range(7))
    return {
        "EpochOrder": EpochOrder(SequentialSampler(data)),
        "EpochSampler": EpochSampler(data, shuffle=False),
        "SkipSampler": SkipSampler(SequentialSampler(data)),
        "SkipBatches": SkipBatches(BatchSampler(SequentialSampler(data), 1, False)),
    }


@pytest.mark.parametrize(("start", "error", "message"), BAD)
@pytest.mark.parametrize("name", NAMES)
def test_wrong_start_raises(name: str, start: object, error: type[Exception], message: str) -> None:
    sampler = samplers()[name]
    with pytest.raises(error, match=message):
        sampler.set_start(start)
    assert len(list(sampler)) == 7  # the refused start left the order as it was


@pytest.mark.parametrize("name", NAMES)
def test_starts_in_and_past_the_epoch(name: str) -> None:
    sampler = samplers()[name]
    sampler.set_start(np.int64(3))  # a position read back from a saved array
    assert len(sampler) == 4 and len(list(sampler)) == 4
    for end in (7, 9):  # at the end, and past it by part of a batch: an empty epoch
        sampler.set_start(end)
        assert len(sampler) == 0 and list(sampler) == []


def test_epoch_sampler_refuses_a_negative_consumed_count() -> None:
    with pytest.raises(ValueError, match=r"set_start got -4\b"):
        EpochSampler(list(range(7))).set_consumed(-4)


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_pack_loader_refuses_a_wrong_start(tmp_path: Path, backend: str) -> None:
    root = photo_folder(tmp_path, n=5)
    small_pack(root, root / "list.csv", tmp_path / "p.pack")
    loader = PackedDataset(tmp_path / "p.pack").loader(batch_size=2, backend=backend)
    with pytest.raises(ValueError, match=r"set_start got -2\b"):
        loader.sampler.set_start(-2)
    with pytest.raises(TypeError, match=r"got 1\.5 \(float\)"):
        loader.sampler.set_start(1.5)
    loader.sampler.set_start(4)  # the last sample only
    assert [b["label"].tolist() for b in loader] == [[4]]
