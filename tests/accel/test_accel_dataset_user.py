"""A practitioner's checks of ``accelerate_dataset`` / ``CachedDataset``: values, lifetimes,
workers and class decoration, as the acceleration docs describe them."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
from collections import UserDict
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset

from scramjet.accel import CachedDataset, CacheWarning, accelerate_dataset


class Ramp(Dataset):
    """Sample ``i`` is a small float tensor filled with ``i``."""

    def __init__(self, n: int = 48) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((4,), float(i))


def _expected(n: int) -> torch.Tensor:
    return torch.arange(float(n)).repeat_interleave(4).view(n, 4)


def test_close_cache_keeps_persistent_workers_serving_an_incomplete_cache():
    ds = CachedDataset(Ramp(48))
    loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    batches = iter(loader)
    next(batches)  # the cache is only partly filled
    del batches
    ds.close_cache()  # documented: the dataset stays usable, read uncached from then on
    assert torch.equal(torch.cat(list(loader)), _expected(48))
    assert torch.equal(torch.cat(list(loader)), _expected(48))


def test_a_subclass_of_a_decorated_dataset_can_be_decorated_again():
    @accelerate_dataset(transform=lambda x: x + 100)
    class Inner(Ramp):
        pass

    @accelerate_dataset(transform=lambda x: x * 2)
    class Outer(Inner):
        pass

    ds = Outer(12)
    want = (_expected(12) + 100) * 2  # the inner class's transform, then the outer one's
    assert torch.equal(torch.stack([ds[i] for i in range(12)]), want)
    assert torch.equal(torch.cat(list(DataLoader(ds, batch_size=5))), want)
    assert torch.equal(torch.stack([ds[i] for i in range(12)]), want)  # now from the cache
    assert ds.cache_stats()["in_memory"] == 12
    assert isinstance(ds, Inner) and Inner(3)[2].tolist() == [102.0] * 4


def test_a_decorated_dataset_under_an_overriding_subclass_can_be_decorated_again():
    @accelerate_dataset(transform=lambda x: x + 100)
    class Inner(Ramp):
        pass

    class Scaled(Inner):
        def __getitem__(self, i):
            return super().__getitem__(i) * 3

    Outer = accelerate_dataset()(Scaled)
    ds = Outer(10)
    want = (_expected(10) + 100) * 3
    assert torch.equal(torch.cat(list(DataLoader(ds, batch_size=4))), want)
    assert torch.equal(torch.stack([ds[i] for i in range(10)]), want)
    assert ds.cache_stats()["in_memory"] == 10


class Unusual(Dataset):
    """Samples torch can hold but NumPy cannot: sparse, conjugated, float8, quantized."""

    def __len__(self) -> int:
        return 3

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        dense = torch.eye(3) * (i + 1)
        return {
            "coo": dense.to_sparse(),
            "csr": dense.to_sparse_csr(),
            "conj": torch.tensor([1 + 2j, 3 - 1j]).mul(i + 1).conj(),
            "f8": torch.arange(4.0).add(i).to(torch.float8_e4m3fnuz),
            "q": torch.quantize_per_tensor(torch.arange(3.0) + i, 0.5, 0, torch.qint8),
        }


def _same_sample(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].layout == b[k].layout
        and a[k].dtype == b[k].dtype
        and torch.equal(
            a[k].to_dense().dequantize().resolve_conj().float(),
            b[k].to_dense().dequantize().resolve_conj().float(),
        )
        if not a[k].is_complex()
        else torch.equal(a[k].resolve_conj(), b[k].resolve_conj())
        for k in a
    )


@pytest.mark.filterwarnings("ignore:.*(Sparse CSR|quantize|TypedStorage).*:UserWarning")
def test_sparse_conjugate_float8_and_quantized_tensors_are_cached_exactly():
    plain = Unusual()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # not mistaken for a random dataset
        ds = CachedDataset(plain)
    for _ in range(2):  # decoded and stored, then read back from the cache
        for i in range(3):
            assert _same_sample(ds[i], plain[i])
    assert ds.cache_stats()["in_memory"] == 3


class Handle:
    """An object without ``__eq__`` (compared by identity), as many user classes are."""

    def __init__(self, i: int) -> None:
        self.i = i


class WithObjects(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> tuple[int, Handle]:
        return i, Handle(i)


def test_objects_compared_by_identity_are_not_called_random():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        ds = CachedDataset(WithObjects())
    assert ds[2][1].i == 2 and ds[2][1].i == 2


class WithLock(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"i": i, "lock": threading.Lock()}


def test_a_sample_that_cannot_be_pickled_is_served_uncached_with_one_warning():
    ds = CachedDataset(WithLock(), probe=False)
    with pytest.warns(CacheWarning, match=r"sample 1 \(a dict\) cannot be cached.*pickl"):
        assert ds[1]["i"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # one warning, not one per sample
        start = time.monotonic()
        assert [ds[i]["i"] for i in (1, 2, 1, 3)] == [1, 2, 1, 3]
        assert time.monotonic() - start < 5  # no wait on a claim left behind
    assert ds.cache_stats()["in_memory"] == 0


class Counting(Dataset):
    """A list-backed dataset that counts its decodes and may grow."""

    def __init__(self, n: int) -> None:
        self.items = [float(i) for i in range(n)]
        self.decodes = 0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> torch.Tensor:
        self.decodes += 1
        return torch.tensor(self.items[i])


def test_tensor_indices_from_subset_and_sampler_are_read_from_the_cache():
    plain = Counting(20)
    ds = CachedDataset(plain, probe=False)
    chosen = torch.randperm(20, generator=torch.Generator().manual_seed(0))[:10]
    subset = Subset(ds, chosen)  # its indices are 0-d tensors
    for _ in range(3):
        assert torch.equal(torch.cat(list(DataLoader(subset, batch_size=4))), chosen.float())
    assert plain.decodes == 10 and ds.cache_stats()["in_memory"] == 10
    order = torch.randperm(20)  # a tensor as the sampler: it yields 0-d tensors
    for _ in range(2):
        got = torch.cat(list(DataLoader(ds, batch_size=8, sampler=order)))
        assert torch.equal(got, order.float())
    assert plain.decodes == 20


def test_a_negative_index_counts_from_the_end_of_a_dataset_that_grew():
    plain = Counting(5)
    ds = CachedDataset(plain, probe=False)
    assert ds[-1].item() == 4.0
    plain.items.append(42.0)  # new samples are read uncached
    with pytest.warns(CacheWarning, match="grew from 5 to 6 samples"):
        assert ds[-1].item() == 42.0 and ds[5].item() == 42.0
    assert ds[-2].item() == 4.0


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(5))

    def __len__(self) -> int:
        return 5


class NoLength(Dataset):
    def __getitem__(self, i: int) -> int:
        return i


def test_an_iterable_dataset_or_one_without_len_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"got Stream \(an IterableDataset\).*map-style"):
        CachedDataset(Stream())
    with pytest.raises(TypeError, match=r"Stream is an IterableDataset: make it a map-style"):
        accelerate_dataset()(Stream)
    with pytest.raises(TypeError, match=r"NoLength has no __len__: define __len__"):
        accelerate_dataset()(NoLength)


def test_max_memory_size_written_as_a_whole_float_is_taken_in_bytes():
    ds = CachedDataset(Ramp(8), max_memory_size=4e6)
    assert ds[3].tolist() == [3.0] * 4 and ds.cache_stats()["in_memory"] == 1
    with pytest.raises(ValueError, match=r"whole number of bytes.*got 1.5"):
        CachedDataset(Ramp(8), max_memory_size=1.5)


def _open_segment_bytes(pid: int, root: str) -> int:
    """Bytes of the cache's sample files under ``root`` that process ``pid`` holds open."""
    total = 0
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            target = os.readlink(os.path.join(fd_dir, fd))
            if target.startswith(root) and "/seg-" in target:
                total += os.stat(os.path.join(fd_dir, fd)).st_size
    return total


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc")
def test_close_cache_frees_the_memory_that_persistent_workers_hold(tmp_path):
    ds = CachedDataset(Ramp(64), cache_dir=str(tmp_path))
    root = ds._scramjet_cache.store.root
    loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    assert torch.equal(torch.cat(list(loader)), _expected(64))
    workers = [w.pid for w in loader._iterator._workers]
    assert sum(_open_segment_bytes(pid, root) for pid in workers) > 0  # the workers' readers
    ds.close_cache()
    assert sum(_open_segment_bytes(pid, root) for pid in workers) == 0
    assert torch.equal(torch.cat(list(loader)), _expected(64))  # read uncached
    assert sum(_open_segment_bytes(pid, root) for pid in workers) == 0


class Encoded(Dataset):
    """Tokenizer-style samples: a ``UserDict`` of tensors (as Hugging Face's BatchEncoding)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> UserDict[str, torch.Tensor]:
        return UserDict({"input_ids": torch.arange(6) + i, "attention_mask": torch.ones(6)})


def test_tokenizer_style_samples_are_not_called_random():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # == of its tensors has no truth value
        ds = CachedDataset(Encoded())
    assert ds[2]["input_ids"].tolist() == [2, 3, 4, 5, 6, 7]
    assert ds[2]["input_ids"].tolist() == [2, 3, 4, 5, 6, 7]


def test_a_cache_dir_that_is_not_a_folder_is_an_error_that_says_so(tmp_path):
    with pytest.raises(ValueError, match=r"cache_dir=.*missing.*does not exist.*create it"):
        CachedDataset(Ramp(4), cache_dir=str(tmp_path / "missing"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"is not an existing folder \(it is a file\)"):
        CachedDataset(Ramp(4), cache_dir=str(tmp_path / "file"))
    assert CachedDataset(Ramp(4), cache_dir=str(tmp_path))[2].tolist() == [2.0] * 4


class OnDevice(Dataset):
    """A small dataset kept on the GPU: samples are CUDA tensors."""

    def __init__(self) -> None:
        self.data = torch.arange(12.0, device="cuda").view(6, 2)

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.data[i]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cached_tensor_comes_back_on_the_device_the_dataset_returned_it_on():
    ds = CachedDataset(OnDevice())
    first, again = ds[3], ds[3]  # decoded, then read from the cache
    assert first.device == again.device == OnDevice()[3].device
    assert torch.equal(first, again)
