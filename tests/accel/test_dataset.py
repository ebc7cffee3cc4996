from __future__ import annotations

import os
import pickle
import threading
import time
import warnings

import numpy as np
import pytest
import torch
from accel_helpers import (
    DecoratedDataset,
    LoggingDataset,
    RandomDataset,
    SlowLoggingDataset,
    add_noise,
    read_log,
    read_log_pids,
)
from torch.utils.data import DataLoader, Subset
from torch.utils.data.distributed import DistributedSampler

from scramjet.accel import CachedDataset, CacheWarning, _preload, accelerate_dataset


def _epochs(ds, epochs: int, **loader_kwargs) -> list[list]:
    loader = DataLoader(ds, batch_size=4, collate_fn=list, **loader_kwargs)
    return [[s for batch in loader for s in batch] for _ in range(epochs)]


def _assert_same_sample(a: dict, b: dict) -> None:
    torch.testing.assert_close(a["x"], b["x"])
    np.testing.assert_array_equal(a["arr"], b["arr"])
    assert a["meta"][:2] == b["meta"][:2] and a["meta"][2][0] == b["meta"][2][0]
    assert a["meta"][2][1]["half"].dtype == torch.bfloat16
    assert torch.equal(a["meta"][2][1]["half"], b["meta"][2][1]["half"])


def test_any_sample_structure_roundtrips(tmp_path):
    raw = LoggingDataset(6, str(tmp_path / "log"))
    ds = CachedDataset(raw, probe=False)
    for i in range(6):
        _assert_same_sample(ds[i], raw[i])
        _assert_same_sample(ds[i], raw[i])  # second read comes from the cache
    assert isinstance(ds[-1]["arr"], np.ndarray) and ds[-1]["meta"][1] == "item-5"
    assert ds.cache_stats()["in_memory"] == 6


@pytest.mark.parametrize(
    ("num_workers", "persistent", "context"),
    [(0, False, None), (2, False, "fork"), (2, True, "fork"), (2, True, "spawn")],
)
def test_decodes_each_sample_once_across_workers(tmp_path, num_workers, persistent, context):
    log = str(tmp_path / "log")
    ds = CachedDataset(LoggingDataset(12, log), probe=False)
    kwargs = {"num_workers": num_workers, "persistent_workers": persistent}
    if context:
        kwargs["multiprocessing_context"] = context
    first, _, third = _epochs(ds, 3, **kwargs)
    assert sorted(read_log(log)) == list(range(12))  # one decode per index, all processes
    for a, b in zip(first, third):
        _assert_same_sample(a, b)
    if num_workers:
        with open(log) as f:
            pids = {line.split()[0] for line in f}
        assert str(os.getpid()) not in pids  # decoded in workers, served to all epochs


def test_decorated_dataset_keeps_identity_pickles_and_works_with_spawn(tmp_path):
    log = str(tmp_path / "log")
    ds = DecoratedDataset(8, log)
    assert type(ds).__name__ == "DecoratedDataset" and isinstance(ds, LoggingDataset)
    assert type(pickle.loads(pickle.dumps(ds))) is DecoratedDataset
    epochs = _epochs(ds, 2, num_workers=1, multiprocessing_context="spawn", persistent_workers=True)
    assert len(epochs[1]) == 8
    assert sorted(read_log(log)) == [0, 0, *range(8)]  # two probe calls, then one each


def test_memory_budget_holds_and_spills_to_disk(tmp_path):
    budget = 5_000  # bytes: a handful of 1 KiB samples
    ds = CachedDataset(
        LoggingDataset(20, str(tmp_path / "log"), size=256), max_memory_size=budget, probe=False
    )
    _epochs(ds, 2, num_workers=2)
    store = ds._scramjet_cache.store
    in_ram = sum(
        os.path.getsize(os.path.join(store.root, f))
        for f in os.listdir(store.root)
        if f.startswith("seg-")
    )
    stats = ds.cache_stats()
    assert in_ram <= budget and stats["memory_bytes"] == in_ram
    assert stats["in_memory"] >= 1 and stats["in_memory"] + stats["on_disk"] == 20
    assert stats["disk_bytes"] > 0
    assert sorted(read_log(str(tmp_path / "log"))) == list(range(20))


def test_without_spill_over_budget_samples_are_loaded_each_time(tmp_path):
    log = str(tmp_path / "log")
    ds = CachedDataset(
        LoggingDataset(10, log, size=256), max_memory_size=3_000, spill=False, probe=False
    )
    _epochs(ds, 2)
    stats = ds.cache_stats()
    assert stats["memory_bytes"] <= 3_000 and stats["on_disk"] == 0
    assert len(read_log(log)) == 10 + (10 - stats["in_memory"])


def test_transform_runs_after_cache_so_augmentations_stay_random(tmp_path):
    ds = CachedDataset(LoggingDataset(4, str(tmp_path / "log")), transform=add_noise)
    first, second = _epochs(ds, 2, num_workers=2)
    for a, b in zip(first, second):
        assert not torch.equal(a["x"], b["x"])
    assert sorted(read_log(str(tmp_path / "log"))) == [0, 0, 0, 1, 2, 3]  # 2 probe calls


def test_probe_warns_about_random_getitem_and_keeps_rng_streams():
    state = torch.get_rng_state()
    with pytest.warns(CacheWarning, match="transform="):
        CachedDataset(RandomDataset())
    assert torch.equal(state, torch.get_rng_state())


class _NaNDataset(torch.utils.data.Dataset):
    """Deterministic samples holding NaN in every supported container and scalar type."""

    def __init__(self, noise: bool = False) -> None:
        self.noise = noise

    def __len__(self) -> int:
        return 3

    def __getitem__(self, i: int) -> dict:
        x = torch.tensor([float("nan"), float(i), 1.0])
        if self.noise:
            x = x + torch.randn(3)  # random, NaN kept at the same position
        return {
            "x": x,
            "half": torch.tensor([float("nan"), 2.0], dtype=torch.bfloat16),
            "z": torch.tensor([complex(float("nan"), 1.0)]),
            "arr": np.array([[np.nan, i], [0.5, np.nan]], dtype=np.float32),
            "nested": [(float("nan"), np.float64("nan")), {"y": torch.full((2,), float("nan"))}],
            "label": i,
        }


def test_probe_treats_nan_at_the_same_position_as_equal():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        ds = CachedDataset(_NaNDataset())
        Decorated = accelerate_dataset()(_NaNDataset)
        Decorated()
    assert torch.isnan(ds[0]["x"][0]) and ds[0]["label"] == 0
    # A random dataset with NaN in it still warns.
    with pytest.warns(CacheWarning, match="transform="):
        CachedDataset(_NaNDataset(noise=True))


def test_subset_and_distributed_sampler(tmp_path):
    log = str(tmp_path / "log")
    ds = CachedDataset(LoggingDataset(16, log), probe=False)
    sub = Subset(ds, [1, 3, 5, 7])
    assert [s["meta"][0] for e in _epochs(sub, 2, num_workers=2) for s in e] == [1, 3, 5, 7] * 2
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=4, sampler=sampler, collate_fn=list, num_workers=2)
    seen = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        seen.append(sorted(s["meta"][0] for b in loader for s in b))
    assert all(len(s) == 8 for s in seen)
    assert sorted(set(read_log(log))) == sorted(set([1, 3, 5, 7]) | set(seen[0]) | set(seen[1]))
    assert len(read_log(log)) == len(set(read_log(log)))


def test_preloading_decodes_ahead_of_the_loop(tmp_path):
    log = str(tmp_path / "log")
    ds = CachedDataset(LoggingDataset(30, log), preloaded_data=2, probe=False)
    ds[0]  # starts the background threads in this process
    deadline = time.monotonic() + 10
    while ds.cache_stats()["in_memory"] < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ds.cache_stats()["in_memory"] == 30
    assert sorted(read_log(log)) == list(range(30))


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="max_memory_size"):
        accelerate_dataset(max_memory_size=-1)
    with pytest.raises(ValueError, match="preloaded_data"):
        CachedDataset([1, 2], preloaded_data=-2)
    with pytest.raises(TypeError, match="map-style"):
        CachedDataset(iter([1, 2]))


def test_close_removes_the_cache_files(tmp_path):
    ds = CachedDataset(LoggingDataset(3, str(tmp_path / "log")), probe=False)
    ds[0]
    root = ds._scramjet_cache.store.root
    assert os.path.isdir(root)
    ds.close_cache()
    assert not os.path.exists(root)


def _preloader_pids(ds) -> list[int]:
    return ds._scramjet_cache.store.preloaders()


def _wait_until(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _background() -> list[str]:
    """The dataset cache's threads alive in this process (other parts of scramjet that an
    earlier test in the process used may keep threads of their own)."""
    ours = ("scramjet-preload", "scramjet-reap")
    return [t.name for t in threading.enumerate() if t.name in ours]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "threads"])
def test_preloaders_end_once_the_cache_is_complete(tmp_path, monkeypatch, processes):
    if not processes:  # the fallback used where fork is unavailable (macOS, Windows)
        monkeypatch.setattr(_preload, "use_processes", lambda: False)
    log = str(tmp_path / "log")
    ds = CachedDataset(SlowLoggingDataset(40, log, delay=0.002), preloaded_data=2, probe=False)
    ds[0]
    started = _preloader_pids(ds)
    assert started, "preloaded_data=2 started no preloader"
    assert _wait_until(lambda: ds._scramjet_cache.is_complete())
    # Nothing keeps running once every sample is stored: no slot, process or thread left.
    assert _wait_until(lambda: not _preloader_pids(ds) and not _background())
    assert not any(_alive(p) for p in started if p != os.getpid())
    assert sorted(read_log(log)) == list(range(40))
    pids = {pid for pid, _ in read_log_pids(log)}
    assert (pids - {os.getpid()}) if processes else pids == {os.getpid()}


def test_close_stops_a_running_preloader(tmp_path):
    ds = CachedDataset(SlowLoggingDataset(500, str(tmp_path / "log")), preloaded_data=1)
    ds[0]
    assert _wait_until(lambda: any(p != os.getpid() for p in _preloader_pids(ds)))
    children = [p for p in _preloader_pids(ds) if p != os.getpid()]
    ds.close_cache()
    assert _wait_until(lambda: not any(_alive(p) for p in children) and not _background())
    assert len(read_log(str(tmp_path / "log"))) < 500


@pytest.mark.parametrize(
    ("num_workers", "persistent", "context"),
    [(0, False, None), (2, False, "fork"), (2, True, "spawn")],
)
def test_preloader_and_readers_never_decode_an_index_twice(
    tmp_path, num_workers, persistent, context
):
    log = str(tmp_path / "log")
    n = 48  # 10 ms each: ~0.5 s of decoding, time for a preloader to start even on a busy machine
    ds = CachedDataset(SlowLoggingDataset(n, log, delay=0.01), preloaded_data=2, probe=False)
    kwargs = {"num_workers": num_workers, "persistent_workers": persistent, "shuffle": True}
    if context:
        kwargs["multiprocessing_context"] = context
    torch.manual_seed(0)
    epochs = _epochs(ds, 2, **kwargs)
    assert sorted(read_log(log)) == list(range(n))  # each index decoded exactly once
    assert sorted(s["meta"][0] for s in epochs[0]) == list(range(n))
    readers = {pid for pid, _ in read_log_pids(log)}
    assert len(readers) >= 2  # the preloader did part of the work, the readers the rest


def test_epoch_one_is_the_same_with_and_without_preloading(tmp_path):
    runs = []
    for pre in (0, 2):
        ds = CachedDataset(SlowLoggingDataset(40, str(tmp_path / f"log{pre}")), preloaded_data=pre)
        torch.manual_seed(1)
        runs.append(_epochs(ds, 2, shuffle=True, num_workers=0))
    for plain, preloaded in zip(runs[0], runs[1]):
        assert [s["meta"][0] for s in plain] == [s["meta"][0] for s in preloaded]
        for a, b in zip(plain, preloaded):
            _assert_same_sample(a, b)


def test_preloader_takes_the_batch_from_its_end(tmp_path):
    log = str(tmp_path / "log")
    ds = CachedDataset(SlowLoggingDataset(200, log, delay=0.01), preloaded_data=1, probe=False)
    batch = list(range(100, 116))
    samples = ds.__getitems__(batch)
    assert [s["meta"][0] for s in samples] == batch
    decoded = read_log_pids(log)
    assert sorted(i for _, i in decoded if i in batch) == batch  # each once
    by_preloader = [i for pid, i in decoded if pid != os.getpid()]
    assert 115 in by_preloader  # the hint said: start from the end of the batch
    mine = [i for pid, i in decoded if pid == os.getpid()]
    assert mine == sorted(mine) and mine[0] == 100  # the reader went from the front


def test_reading_a_complete_cache_takes_no_lock_and_starts_nothing(tmp_path):
    log = str(tmp_path / "log")
    ds = CachedDataset(SlowLoggingDataset(24, log, delay=0.0), preloaded_data=2, probe=False)
    _epochs(ds, 1)
    assert _wait_until(lambda: ds._scramjet_cache.is_complete() and not _preloader_pids(ds))
    assert _wait_until(lambda: not _background())  # the preloader process has been reaped
    reader = pickle.loads(pickle.dumps(ds))  # attaches like a spawned DataLoader worker
    store = reader._scramjet_cache.store
    assert store.root == ds._scramjet_cache.store.root
    for a, b in zip(_epochs(reader, 1, shuffle=False)[0], _epochs(ds, 1, shuffle=False)[0]):
        _assert_same_sample(a, b)
    assert store._lock_fd is None  # no claim, no reservation: the lock file was never opened
    assert not _preloader_pids(reader) and not _background()
    assert sorted(read_log(log)) == list(range(24))


@accelerate_dataset(probe=False)
class _Numbers(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> float:
        return float(i)


class _Doubled(_Numbers):
    def __getitem__(self, i: int) -> float:
        return 2 * super().__getitem__(i)


class _Tripled(CachedDataset):
    def __getitem__(self, i: int) -> float:
        return 3 * super().__getitem__(i)


def test_a_subclass_that_overrides_getitem_is_read_the_same_by_a_dataloader():
    """The DataLoader reads a batch through __getitems__; a subclass's own __getitem__
    must decide the samples there too, and what it reads through super() stays cached."""
    doubled = _Doubled()
    assert [doubled[i] for i in range(6)] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert next(iter(DataLoader(doubled, batch_size=6))).tolist() == [0, 2, 4, 6, 8, 10]
    assert doubled.cache_stats()["samples"] == 6
    tripled = _Tripled(torch.arange(6.0), probe=False)
    assert next(iter(DataLoader(tripled, batch_size=6))).tolist() == [0, 3, 6, 9, 12, 15]
    plain = _Numbers()  # no override: the batched read still goes through the cache
    assert next(iter(DataLoader(plain, batch_size=6))).tolist() == [0, 1, 2, 3, 4, 5]
    assert plain.cache_stats()["samples"] == 6
