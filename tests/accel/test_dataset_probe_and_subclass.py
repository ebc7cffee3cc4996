"""Decorated datasets built the ways PyTorch allows:

- keyed by names, or with a damaged first sample: the construction-time randomness probe
  read sample 0 and its error stopped the construction (a plain dataset raises only when
  that sample is read); now the probe is skipped with a warning;
- an undecorated subclass that sets its data after ``super().__init__()`` (the torchvision
  pattern): the cache was built inside the base's ``__init__``, before the data existed
  (AttributeError); now it is built at the first read;
- nebulgym's names take scramjet's own keywords (``transform=``, ``probe=``), as the
  README's table says.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from scramjet.accel import CacheWarning, accelerate_dataset
from scramjet.compat import nebulgym


class Keyed(Dataset):
    def __init__(self) -> None:
        self.data = {"a": torch.tensor([1.0, 2.0])}

    def __len__(self) -> int:
        return 1

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.data[key]


class BrokenFirst(Dataset):
    def __len__(self) -> int:
        return 3

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 0:
            raise ValueError("corrupt file 0")
        return torch.tensor(float(i))


def test_a_sample_zero_that_cannot_be_read_skips_the_probe_with_a_warning() -> None:
    with pytest.warns(CacheWarning, match=r"Keyed\[0\] raised KeyError.*could not be checked"):
        keyed = accelerate_dataset()(Keyed)()
    assert torch.equal(keyed["a"], torch.tensor([1.0, 2.0]))  # other keys bypass the cache
    with pytest.warns(CacheWarning, match=r"BrokenFirst\[0\] raised ValueError: corrupt file 0"):
        broken = accelerate_dataset()(BrokenFirst)()
    assert broken[2].item() == 2.0
    with pytest.raises(ValueError, match="corrupt file 0"):  # raised where it is read
        broken[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        accelerate_dataset(probe=False)(BrokenFirst)()


@accelerate_dataset()
class Base(Dataset):
    def __init__(self, root: str) -> None:
        self.root = root

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.items[i]


class Child(Base):
    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.items = [torch.tensor(float(i)) for i in range(5)]


def test_an_undecorated_subclass_that_sets_its_data_after_super_init_is_cached() -> None:
    assert Child("root").cache_stats()["samples"] == 5  # asked before any read
    child = Child("root")
    assert [child[i].item() for i in range(5)] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert child.cache_stats()["samples"] == 5
    batches = [b.tolist() for b in DataLoader(child, batch_size=2)]
    assert batches == [[0.0, 1.0], [2.0, 3.0], [4.0]]


class Plain(Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(float(i))


def test_nebulgym_names_take_scramjets_keywords() -> None:
    double = lambda x: x * 2  # noqa: E731
    assert nebulgym.accelerate_dataset(transform=double)(Plain)()[1].item() == 2.0
    assert nebulgym.patch_dataset(max_memory_size=1 << 20, probe=False)(Plain)()[1].item() == 1.0
    assert nebulgym.NebulDataset(Plain(), transform=double)[1].item() == 2.0
    with pytest.raises(TypeError, match="unexpected keyword"):
        nebulgym.accelerate_dataset(transfrom=double)
