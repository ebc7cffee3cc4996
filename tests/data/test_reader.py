"""PackedDataset with DataLoader workers, samplers, batches and caching wrappers."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from scramjet.accel import CachedDataset, accelerate_dataset
from scramjet.data import PackedDataset, pack
from scramjet.data.augment import Augmentation, Brighten, Compose, Flip, Noise


def make_pack(folder, tmp_path, encode):
    root, imgs = folder
    pack(
        root,
        root / "list.csv",
        tmp_path / "p",
        dtype=["int64"],
        height=32,
        width=40,
        encode=encode,
        shards=3,
        workers=0,
        progress=False,
    )
    return PackedDataset(tmp_path / "p"), imgs


@pytest.fixture(params=["raw", "jpeg"])
def packed(request, folder, tmp_path):
    return make_pack(folder, tmp_path, request.param)


# spawn workers start slowly (a fresh interpreter each): plain DataLoader cases only
WORKER_CASES = [
    ("raw", "fork"),
    ("jpeg", "fork"),
    pytest.param("raw", "spawn", marks=pytest.mark.slow),
    ("jpeg", "spawn"),
]
SLOT_CASES = [("raw", "fork"), ("jpeg", "fork"), ("jpeg", "spawn")]


@pytest.mark.parametrize("encode,context", WORKER_CASES)
def test_dataloader_workers_fork_and_spawn(folder, tmp_path, encode, context):
    ds, _ = make_pack(folder, tmp_path, encode)
    ds[0]  # open maps in the parent first: workers must not reuse them
    loader = DataLoader(ds, batch_size=5, num_workers=2, multiprocessing_context=context)
    batches = list(loader)
    labels = torch.cat([b["label"] for b in batches]).tolist()
    assert labels == [i % 4 for i in range(12)]
    images = torch.cat([b["image"] for b in batches])
    assert images.shape == (12, 32, 40, 3) and images.dtype == torch.uint8
    np.testing.assert_array_equal(images[7].numpy(), ds[7]["image"])


def test_fast_loader_matches_per_item_reads(packed):
    ds, _ = packed
    gen = torch.Generator().manual_seed(0)
    seen = []
    for batch in ds.loader(4, shuffle=True, generator=gen, num_workers=2):
        assert batch["image"].shape[1:] == (32, 40, 3)
        for _img, label in zip(batch["image"], batch["label"]):
            seen.append(int(label))
        idx = [i for i in range(12) if ds[i]["label"] == batch["label"][0]]
        assert any(np.array_equal(batch["image"][0].numpy(), ds[i]["image"]) for i in idx)
    assert sorted(seen) == sorted(i % 4 for i in range(12))
    batch = ds[[11, 0, 5, 5, -1]]
    for pos, i in enumerate([11, 0, 5, 5, 11]):
        np.testing.assert_array_equal(batch["image"][pos].numpy(), ds[i]["image"])
    assert [s["label"] for s in ds.__getitems__([3, 2])] == [3, 2]


@pytest.mark.parametrize(
    "indices",
    [
        list(range(12)),  # in order: one copy per shard
        [2, 3, 4, 5, 6],  # a run that crosses shards
        [5, 6, 7, 1, 2, 3],  # runs in the file that are not runs in the batch
        [4, 4, 5, 5, 5, 3],  # repeated samples
        [-1, -12, 0, 11, 7, 8, 9, -3],
        [],
    ],
)
def test_batches_equal_per_item_reads_in_any_order(packed, indices):
    ds, _ = packed
    images = np.stack([ds[i]["image"] for i in indices]) if indices else None
    labels = [int(ds[i]["label"]) for i in indices]
    batch = ds.get_batch(indices)
    assert batch["label"].tolist() == labels
    out = np.zeros((len(indices), 32, 40, 3), np.uint8)
    ds.get_batch(indices, image_out=out)
    if images is None:
        assert batch["image"].shape == (0, 32, 40, 3)
        return
    np.testing.assert_array_equal(batch["image"].numpy(), images)
    np.testing.assert_array_equal(out, images)


def test_distributed_sampler_covers_every_sample_once(packed):
    ds, _ = packed
    got = []
    for rank in range(2):
        sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=1)
        sampler.set_epoch(3)
        for batch in DataLoader(ds, batch_size=4, sampler=sampler):
            got.extend(batch["label"].tolist())
        got_fast = [x for b in ds.loader(4, sampler=sampler) for x in b["label"].tolist()]
        assert sorted(got_fast) == sorted(got[-len(got_fast) :])
    assert sorted(got) == sorted(i % 4 for i in range(12))


class CachingWrapper(Dataset):
    """A generic caching wrapper: calls __getitem__ once and keeps pickled results."""

    def __init__(self, ds):
        self.ds, self.cache = ds, {}

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        if i not in self.cache:
            self.cache[i] = pickle.dumps(self.ds[i])
        return pickle.loads(self.cache[i])


def test_samples_and_dataset_are_picklable_for_caching(packed):
    ds, _ = packed
    clone = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(clone[4]["image"], ds[4]["image"])
    sample = ds[4]
    assert isinstance(sample["image"], np.ndarray) and not isinstance(sample["image"], np.memmap)
    cached = CachingWrapper(ds)
    first = [cached[i] for i in range(12)]
    second = [cached[i] for i in range(12)]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a["image"], b["image"])
    loader = DataLoader(CachingWrapper(ds), batch_size=6, num_workers=1)
    assert sum(len(b["label"]) for b in loader) == 12


def test_columns_subset_and_index_errors(packed):
    ds, _ = packed
    labels_only = PackedDataset(ds.path, columns=["label"])
    assert list(labels_only[3]) == ["label"]
    with pytest.raises(ValueError, match="unknown columns"):
        PackedDataset(ds.path, columns=["nope"])
    with pytest.raises(IndexError, match="out of range"):
        ds[12]
    assert ds[-1]["label"] == ds[11]["label"]
    assert "samples=12" in repr(ds)


class RecordIndex(Augmentation):
    """A transform that keeps the sample indices it is called with."""

    def __init__(self) -> None:
        super().__init__()
        self.indices: list[int | None] = []

    def __call__(self, x, *, rng=None, index=None, epoch=0):
        self.indices.append(index)
        return x


def test_negative_indices_count_once_from_the_end(packed):
    """Like a Python list: -n..n-1 name samples, -1 the last; anything else is an
    IndexError naming the index and the length (never a second wrap)."""
    ds, _ = packed
    n = len(ds)
    samples = [ds.read(i) for i in range(n)]
    for i in range(-n, n):
        np.testing.assert_array_equal(ds[i]["image"], samples[i]["image"])
    for bad in (-n - 1, -2 * n, -2 * n - 1, n, 2 * n):
        with pytest.raises(IndexError, match=rf"index {bad} is out of range .* {n} samples"):
            ds[bad]
    record = RecordIndex()
    tds = PackedDataset(ds.path, transform={"label": record})
    tds[-1], tds[-n]
    with pytest.raises(IndexError, match=rf"index {-n - 1} is out of range"):
        tds[-n - 1]
    assert record.indices == [n - 1, 0]  # the transform gets the sample's own index


def test_a_0d_integer_tensor_or_numpy_integer_is_one_index(packed):
    ds, _ = packed
    n = len(ds)
    for index, want in [
        (torch.tensor(3), 3),
        (torch.tensor(-1, dtype=torch.int32), n - 1),
        (np.int64(5), 5),
        (np.array(7), 7),
    ]:
        got = ds[index]
        assert isinstance(got, dict), type(index)
        np.testing.assert_array_equal(got["image"], ds[want]["image"])
    batch = ds[torch.tensor([3, -1])]  # a 1-d tensor stays a batch
    np.testing.assert_array_equal(batch["image"][1].numpy(), ds[n - 1]["image"])
    with pytest.raises(TypeError, match=r"must hold an integer; received a Tensor of dtype"):
        ds[torch.tensor(2.0)]
    with pytest.raises(IndexError, match=rf"index {n} is out of range"):
        ds[torch.tensor(n)]


def test_one_column_may_be_named_as_a_string(packed):
    ds, _ = packed
    one = PackedDataset(ds.path, columns="label")
    assert one.column_names == ["label"] and list(one[3]) == ["label"]
    assert one[3]["label"] == ds[3]["label"]


def test_transforms_get_index_and_epoch(packed):
    ds, _ = packed
    aug = Compose(Flip(p=0.5), Noise(0.1), seed=5)
    tds = PackedDataset(ds.path, transform={"image": aug})
    np.testing.assert_array_equal(tds[-10]["image"], tds[2]["image"])  # index normalised
    a, b = tds[2]["image"], tds[2]["image"]
    np.testing.assert_array_equal(a, b)  # same (seed, epoch, index): same draw
    tds.set_epoch(1)
    assert not np.array_equal(tds[2]["image"], a)
    whole = PackedDataset(ds.path, transform=lambda s: {"x": s["label"] * 2})
    assert whole[3] == {"x": 6}
    batch = next(iter(tds.loader(3)))
    assert batch["image"].shape == (3, 32, 40, 3)


@pytest.mark.parametrize("encode,context", SLOT_CASES)
def test_persistent_worker_slots_give_exact_independent_batches(folder, tmp_path, encode, context):
    """With persistent workers, batches travel through reused shared slots."""
    ds, _ = make_pack(folder, tmp_path, encode)
    loader = ds.loader(
        5,
        num_workers=2,
        persistent_workers=True,
        prefetch_factor=1,
        multiprocessing_context=context,
    )
    assert len(loader) == 3
    for _batch in loader:  # abandon the first epoch after one batch: stale slots
        break
    for _ in range(2):
        kept = list(loader)  # every batch kept alive while slots are reused
        assert [len(b["label"]) for b in kept] == [5, 5, 2]
        for i, batch in enumerate(kept):
            expected = ds[list(range(5 * i, min(5 * i + 5, 12)))]
            assert torch.equal(batch["image"], expected["image"])
            assert torch.equal(batch["label"], expected["label"])


@accelerate_dataset(max_memory_size=1 << 24)
class AcceleratedPack(PackedDataset):
    """A PackedDataset whose samples scramjet.accel caches (module level: picklable)."""


def test_cached_and_accelerated_pack_match_the_uncached_one(packed):
    ds, _ = packed
    expected = [ds[i] for i in range(len(ds))]
    for cached in (CachedDataset(PackedDataset(ds.path), max_memory_size=1 << 24),
                   AcceleratedPack(ds.path)):  # fmt: skip
        for _ in range(2):  # the first epoch fills the cache, the second reads from it
            batches = list(DataLoader(cached, batch_size=5, num_workers=2))
            images = torch.cat([b["image"] for b in batches])
            labels = torch.cat([b["label"] for b in batches])
            assert labels.tolist() == [int(s["label"]) for s in expected]
            for i, sample in enumerate(expected):
                np.testing.assert_array_equal(images[i].numpy(), sample["image"])
        assert cached.cache_stats()["in_memory"] == len(ds)
        cached.close_cache()


AUG = Compose(Flip(), Brighten(0.4), Noise(0.1), seed=9)


def augment_sample(sample):
    """A transform on the whole sample that calls a seeded augmentation inside."""
    return {"image": AUG(sample["image"]), "label": sample["label"]}


def test_augmentations_inside_a_sample_transform_draw_per_sample(packed):
    ds, _ = packed
    tds = PackedDataset(ds.path, transform=augment_sample)
    tds.set_epoch(1)
    in_process = torch.cat([b["image"] for b in tds.loader(4)])
    in_workers = torch.cat([b["image"] for b in tds.loader(4, num_workers=2)])
    assert torch.equal(in_process, in_workers)  # the same draws in every worker
    for i in (0, 5, 11):  # and those of the augmentation given the index itself
        np.testing.assert_array_equal(in_process[i].numpy(), AUG(ds[i]["image"], index=i, epoch=1))
