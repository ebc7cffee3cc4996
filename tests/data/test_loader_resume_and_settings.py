"""A user's view of ``PackedDataset.loader``: a hand-written mid-epoch resume, a shard
changed on disk while it is read, and settings of the wrong type."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
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


def rewrite_in_place(shard: Path) -> None:
    """What ``cp other.h5 shard.h5`` does to a shard in use: the same file, another size."""
    data = shard.read_bytes()
    with open(shard, "r+b") as f:
        f.write(bytes(255 - b for b in data) + b"more")


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_a_shard_rewritten_while_a_loader_reads_it_is_an_error_naming_it(
    ds: PackedDataset, backend: str
) -> None:
    loader = ds.loader(4, backend=backend, num_workers=0)
    assert len(labels_and_pixels(loader)) == 12  # every shard open and mapped
    rewrite_in_place(ds.path / "shard-00001.h5")
    with pytest.raises(Exception, match=r"shard-00001\.h5 of pack .* changed on disk") as err:
        labels_and_pixels(loader)
    assert "make a new PackedDataset" in str(err.value)


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_a_shard_written_over_with_as_many_bytes_is_an_error_too(
    ds: PackedDataset, backend: str
) -> None:
    # Before, only a change of size was seen: the loader read the new bytes as the old
    # pack's samples, through offsets that no longer matched them.
    loader = ds.loader(4, backend=backend, num_workers=0)
    assert len(labels_and_pixels(loader)) == 12
    shard = ds.path / "shard-00001.h5"
    data = shard.read_bytes()
    time.sleep(0.01)  # a later modification time on file systems with coarse clocks
    with open(shard, "r+b") as f:
        f.write(bytes(255 - b for b in data))
    with pytest.raises(
        Exception,
        match=r"shard-00001\.h5 of pack .* changed on disk while it was being read \(written over",
    ):
        labels_and_pixels(loader)


def test_a_shard_truncated_while_read_is_an_error_not_sigbus(ds: PackedDataset) -> None:
    import subprocess
    import sys

    script = (
        "import sys\nfrom pathlib import Path\nfrom scramjet.data import PackedDataset\n"
        "ds = PackedDataset(sys.argv[1])\nL = ds.loader(4, backend='threads', num_workers=1)\n"
        "list(L)\nshard = Path(sys.argv[1]) / 'shard-00001.h5'\n"
        "open(shard, 'r+b').truncate(100)\n"
        "try:\n    list(L)\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(ds.path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr  # a memory map read past the end: -7 (SIGBUS)
    assert "PackFormatError" in out.stdout and "changed on disk" in out.stdout


@pytest.mark.parametrize("backend", ["threads", "processes"])
@pytest.mark.parametrize("workers", [None, "2", 2.5, True])
def test_num_workers_of_the_wrong_type_says_what_it_received(
    ds: PackedDataset, backend: str, workers: Any
) -> None:
    with pytest.raises(TypeError, match=r"num_workers must be an int >= 0 .*received"):
        ds.loader(4, num_workers=workers, backend=backend)


def test_negative_num_workers_and_a_seed_as_generator_are_refused_clearly(
    ds: PackedDataset,
) -> None:
    with pytest.raises(ValueError, match=r"received -1\. Pass 0 or a positive count"):
        ds.loader(4, num_workers=-1, backend="threads")
    with pytest.raises(TypeError, match=r"received int 5\. .*manual_seed\(5\)"):
        ds.loader(4, shuffle=True, generator=5)
    assert len(ds.loader(4, num_workers=np.int64(1), backend="threads")) == 3


@pytest.mark.parametrize("backend", ["auto", "processes"])
def test_collate_fn_and_batch_sampler_are_refused_not_given_a_batch(
    ds: PackedDataset, backend: str
) -> None:
    def stack(samples: list[dict[str, Any]]) -> Any:  # written for lists of samples
        return torch.stack([torch.as_tensor(s["image"]) for s in samples])

    with pytest.raises(ValueError, match=r"collate_fn .* DataLoader\(ds, batch_size="):
        ds.loader(4, backend=backend, collate_fn=stack)
    with pytest.raises(ValueError, match=r"batch_sampler: .* DataLoader\(ds, batch_sampler="):
        ds.loader(4, backend=backend, batch_sampler=[[0, 1]])
    loader = torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=stack)
    assert next(iter(loader)).shape == (4, 32, 40, 3)  # the way the message gives


@pytest.mark.skipif(torch.cuda.is_available(), reason="pin_memory=True is honoured with CUDA")
def test_pin_memory_without_cuda_warns_at_the_users_line(ds: PackedDataset) -> None:
    with pytest.warns(UserWarning, match="CUDA is not available") as caught:
        loader = ds.loader(4, pin_memory=True, backend="threads")
    assert caught[0].filename == __file__  # not a line inside scramjet
    assert len(labels_and_pixels(loader)) == 12
