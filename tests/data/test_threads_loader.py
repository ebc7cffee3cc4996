"""The threaded in-process pack loader: same batches as worker processes, reused buffers,
seeded augmentations, per-epoch order, mid-epoch skips, backend choice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Sampler

from scramjet.data import PackedDataset, pack
from scramjet.data._threads import EpochOrder, ThreadedLoader, choose_backend
from scramjet.data.augment import Brighten, Compose, Flip, Noise

ORDER = [7, 2, 11, 0, 5, 9, 1, 3, 10, 4, 8, 6]


class ListSampler(Sampler[int]):
    """A fixed order, the same for every loader that uses it."""

    def __init__(self, order: list[int]) -> None:
        self.order = order

    def __iter__(self) -> Any:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)


def make_pack(folder: tuple[Path, Any], tmp_path: Path, encode: str) -> PackedDataset:
    root, _ = folder
    pack(
        root, root / "list.csv", tmp_path / f"{encode}.pack", dtype=["int64"], height=32,
        width=40, encode=encode, shards=3, workers=0, progress=False,
    )  # fmt: skip
    return PackedDataset(tmp_path / f"{encode}.pack")


@pytest.fixture(params=["raw", "jpeg"])
def ds(request: Any, folder: tuple[Path, Any], tmp_path: Path) -> PackedDataset:
    return make_pack(folder, tmp_path, request.param)


def labels(batches: list[dict[str, Any]]) -> list[int]:
    return [int(x) for b in batches for x in b["label"]]


def assert_same_batches(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_threads_give_the_process_loaders_batches_in_the_same_order(ds: PackedDataset) -> None:
    threads = ds.loader(5, sampler=ListSampler(ORDER), backend="threads", num_workers=3)
    assert isinstance(threads, ThreadedLoader) and threads.threads == 3 and len(threads) == 3
    procs = ds.loader(5, sampler=ListSampler(ORDER), backend="processes", num_workers=2)
    assert isinstance(procs, DataLoader)
    got, want = list(threads), list(procs)
    assert_same_batches(got, want)
    assert labels(got) == [i % 4 for i in ORDER]
    for pos, i in enumerate(ORDER):  # and the images are the samples' own
        assert np.array_equal(got[pos // 5]["image"][pos % 5].numpy(), ds[i]["image"])
    assert [len(b["label"]) for b in got] == [5, 5, 2]
    dropped = ds.loader(5, sampler=ListSampler(ORDER), backend="threads", drop_last=True)
    assert [len(b["label"]) for b in dropped] == [5, 5]


def test_kept_batches_are_never_overwritten_and_free_buffers_are_reused(ds: PackedDataset) -> None:
    loader = ds.loader(2, sampler=ListSampler(ORDER), num_workers=2, prefetch_factor=1)
    assert isinstance(loader, ThreadedLoader)
    first = list(loader)  # all six batches kept alive while the loader runs on
    second = list(loader)
    assert_same_batches(first, second)
    for k, batch in enumerate(first):
        assert torch.equal(batch["image"], ds[ORDER[2 * k : 2 * k + 2]]["image"])
    views = [b["image"].permute(0, 3, 1, 2) for b in first]  # a derived view keeps it too
    del first, second
    third = list(loader)
    for k, view in enumerate(views):
        assert torch.equal(view, third[k]["image"].permute(0, 3, 1, 2))
    del views, third
    ptrs = set()
    for batch in loader:  # each batch dropped before the next: a handful of buffers
        ptrs.add(batch["image"].data_ptr())
    assert len(ptrs) <= 2 * 1 + 2


def test_breaking_off_an_epoch_and_errors_in_threads(ds: PackedDataset) -> None:
    loader = ds.loader(3, shuffle=False, num_workers=2)
    for _ in loader:
        break
    assert labels(list(loader)) == [i % 4 for i in range(12)]
    bad = ds.loader(3, sampler=ListSampler([0, 1, 99]), num_workers=2)
    with pytest.raises(IndexError, match="index 99 is out of range"):
        list(bad)


AUG = Compose(Flip(p=0.5), Brighten(0.3), Noise(0.05), seed=11)


def test_seeded_augmentations_match_the_process_loader(folder: Any, tmp_path: Path) -> None:
    plain = make_pack(folder, tmp_path, "jpeg")
    ds = PackedDataset(plain.path, transform={"image": AUG})
    ds.set_epoch(2)
    assert choose_backend("auto", True, {}) == "processes"  # a transform: workers by default
    threads = ds.loader(4, sampler=ListSampler(ORDER), backend="threads", num_workers=2)
    procs = ds.loader(4, sampler=ListSampler(ORDER), num_workers=2)
    assert isinstance(threads, ThreadedLoader) and isinstance(procs, DataLoader)
    got, want = list(threads), list(procs)
    assert_same_batches(got, want)
    i = ORDER[5]
    expected = AUG(plain[i]["image"], index=i, epoch=2)
    assert np.array_equal(got[1]["image"][1].numpy(), expected)
    threads.set_epoch(3)  # the loader's epoch reaches the augmentations
    assert not torch.equal(next(iter(threads))["image"], got[0]["image"])


def test_shuffled_order_follows_seed_and_epoch_and_resumes_mid_epoch(ds: PackedDataset) -> None:
    def loader() -> ThreadedLoader:
        made = ds.loader(5, shuffle=True, generator=torch.Generator().manual_seed(4))
        assert isinstance(made, ThreadedLoader)
        return made

    a = loader()
    a.set_epoch(0)
    epoch0 = labels(list(a))
    a.set_epoch(1)
    epoch1 = [int(i) for i in a.sampler]
    b = loader()  # a new loader (a resumed run): same seed, epoch 1 -> the same order
    b.set_epoch(1)
    assert [int(i) for i in b.sampler] == epoch1
    assert sorted(epoch1) == list(range(12)) and epoch1 != list(range(12))
    b.set_epoch(0)
    assert labels(list(b)) == epoch0
    b.set_epoch(1)
    b.sampler.set_start(5)  # one batch consumed before the interruption
    assert len(b) == 2
    rest = list(b)
    assert labels(rest) == [i % 4 for i in epoch1[5:]]
    b.sampler.set_start(0)
    assert len(b) == 3


def test_backend_choice_and_bad_arguments(ds: PackedDataset) -> None:
    assert choose_backend("auto", False, {"pin_memory": False}) == "threads"
    assert choose_backend("auto", False, {"persistent_workers": True}) == "processes"
    ring = ds.loader(4, num_workers=1, persistent_workers=True)
    assert not isinstance(ring, ThreadedLoader)
    with pytest.raises(ValueError, match=r"does not take the DataLoader settings \['timeout'\]"):
        ds.loader(4, backend="threads", timeout=5)
    with pytest.raises(ValueError, match="backend must be one of"):
        ds.loader(4, backend="fibres")
    with pytest.raises(ValueError, match="needs backend='threads'"):
        ds.loader(4, backend="processes", decode_device="cuda")
    with pytest.raises(ValueError, match="batch_size and prefetch must be >= 1"):
        ThreadedLoader(ds, 0, sampler=EpochOrder(ListSampler(ORDER)))


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_bad_batch_sizes_and_prefetch_factors_are_refused(ds: PackedDataset, backend: str) -> None:
    with pytest.raises(TypeError, match=r"batch_size must be an int .*received str '8'"):
        ds.loader("8", backend=backend)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"batch_size must be >= 1 .*received 0"):
        ds.loader(0, backend=backend)
    workers = {"num_workers": 1} if backend == "processes" else {}
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match=rf"prefetch_factor must be an int >= 1 .*{bad}"):
            ds.loader(4, backend=backend, prefetch_factor=bad, **workers)
    default = ds.loader(4, backend=backend, prefetch_factor=None)
    assert labels(list(default)) == labels(list(ds.loader(4, backend=backend)))
    if backend == "threads":
        assert isinstance(default, ThreadedLoader) and default.prefetch == 2
        three = ds.loader(4, backend=backend, prefetch_factor=3)
        assert isinstance(three, ThreadedLoader) and three.prefetch == 3
    else:
        three = ds.loader(4, backend=backend, prefetch_factor=3, num_workers=1)
        assert isinstance(three, DataLoader) and three.prefetch_factor == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_pin_memory_without_cuda_warns_and_reads_into_ordinary_memory(ds: PackedDataset) -> None:
    with pytest.warns(UserWarning, match="CUDA is not available"):
        loader = ds.loader(5, sampler=ListSampler(ORDER), pin_memory=True)
    assert isinstance(loader, ThreadedLoader) and not loader.pin_memory
    assert labels(list(loader)) == [i % 4 for i in ORDER]
    assert not ds.loader(5).pin_memory  # type: ignore[union-attr]


def test_value_only_columns_and_sequences_of_indices(ds: PackedDataset) -> None:
    only_labels = PackedDataset(ds.path, columns=["label"])
    loader = only_labels.loader(5, sampler=ListSampler(ORDER))
    assert isinstance(loader, ThreadedLoader)
    assert labels(list(loader)) == [i % 4 for i in ORDER]
