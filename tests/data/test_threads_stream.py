"""The threaded loader on packs streamed from a URL (``file://`` here; S3 in
``test_stream_s3.py``): the same batches as the local pack, each shard downloaded once,
the cache limit kept with every thread reading, resumes that skip whole shards, and no
shard left in use after an epoch is broken off or fails."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from packdata_helpers import watching_cache, write_csv, write_images

from scramjet.data import PackedDataset, pack
from scramjet.data._remote import LOG_NAME, ShardDownloadError
from scramjet.data._threads import ThreadedLoader
from scramjet.trainer.data_order import EpochSampler

SHARDS, PER_SHARD = 8, 6


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A raw pack of 48 images 32x40 (label = row), 8 shards of 6, in a local folder."""
    root = tmp_path_factory.mktemp("threads-stream")
    names = write_images(root / "imgs", SHARDS * PER_SHARD)
    rows = [[n, str(i)] for i, (n, _) in enumerate(names)]
    write_csv(root / "imgs" / "list.csv", ["image", "label"], rows)
    pack(root / "imgs", root / "imgs" / "list.csv", root / "p.pack", dtype=["int64"],
         height=32, width=40, encode="raw", shards=SHARDS, workers=0, progress=False)  # fmt: skip
    return root / "p.pack"


def streamed(store: Path, cache: Path, **kwargs: Any) -> PackedDataset:
    return PackedDataset(f"file://{store}", cache_dir=cache, **kwargs)


def downloads(cache: Path) -> int:
    log = cache / LOG_NAME
    return len(log.read_text().splitlines()) if log.exists() else 0


def shards_in_use(cache: Path) -> list[str]:
    """Cached shards some reader holds (a shared lock): eviction would have to skip them."""
    held = []
    for path in sorted(cache.glob("*.h5")):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(path.name)
        finally:
            os.close(fd)
    return held


def test_threads_read_a_streamed_pack_like_the_local_one(store: Path, tmp_path: Path) -> None:
    remote = streamed(store, tmp_path / "cache", shuffle_window=2, prefetch=2)
    local = PackedDataset(store, shuffle_window=2)
    a, b = EpochSampler(remote, seed=3), EpochSampler(local, seed=3)
    got = remote.loader(5, sampler=a, num_workers=2)
    want = local.loader(5, sampler=b, num_workers=2)
    assert isinstance(got, ThreadedLoader)  # "auto" reads streamed packs in threads too
    for epoch in range(2):
        got.set_epoch(epoch)
        want.set_epoch(epoch)
        pairs = list(zip(got, want, strict=True))
        assert len(pairs) == 10
        for x, y in pairs:
            assert torch.equal(x["label"], y["label"]) and torch.equal(x["image"], y["image"])
        labels = sorted(int(v) for x, _ in pairs for v in x["label"])
        assert labels == list(range(48))
    assert downloads(tmp_path / "cache") == SHARDS  # each shard once, kept for epoch 2
    assert remote._pins == {}


def test_the_cache_limit_holds_with_every_thread_reading(store: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    shard = PackedDataset(store).manifest.shards[0].bytes
    limit = 5 * shard + shard // 2  # the documented minimum (window 2 + prefetch 1 + 2)
    ds = streamed(store, cache, cache_limit=limit, shuffle_window=2, prefetch=1)
    assert ds._remote is not None
    ds._remote.wait_for_room = 20  # a stall fails in 20 s instead of two minutes
    sampler = EpochSampler(ds, seed=5)
    loader = ds.loader(4, sampler=sampler, num_workers=3, prefetch_factor=2)
    with watching_cache(cache) as peak:
        for epoch in range(3):
            loader.set_epoch(epoch)
            seen = [int(v) for batch in loader for v in batch["label"]]
            assert sorted(seen) == list(range(48)), epoch
            assert ds._pins == {}
    assert 0 < peak[0] <= limit
    assert downloads(cache) > SHARDS  # shards were evicted and fetched again


def test_a_resume_skips_whole_shards_without_downloading_them(store: Path, tmp_path: Path) -> None:
    full_ds = PackedDataset(store, shuffle_window=2)
    sampler = EpochSampler(full_ds, seed=7)
    sampler.set_epoch(1)
    whole = list(sampler)
    ds = streamed(store, tmp_path / "cache", shuffle_window=2, prefetch=2)
    loader = ds.loader(4, sampler=EpochSampler(ds, seed=7), num_workers=2)
    loader.set_epoch(1)
    loader.sampler.set_start(2 * PER_SHARD)  # the whole first window of 2 shards
    seen = [int(v) for batch in loader for v in batch["label"]]
    assert seen == whole[2 * PER_SHARD :]
    assert downloads(tmp_path / "cache") == SHARDS - 2  # the skipped window never came


class _CountedPins(dict[int, int]):
    """The reader's pins, recording the most shards pinned at once."""

    most = 0

    def __setitem__(self, key: int, value: int) -> None:
        super().__setitem__(key, value)
        self.most = max(self.most, len(self))


def test_breaking_off_or_failing_leaves_no_shard_in_use(store: Path, tmp_path: Path) -> None:
    shard = PackedDataset(store).manifest.shards[0].bytes
    ds = streamed(store, tmp_path / "cache", cache_limit=6 * shard, shuffle_window=2)
    loader = ds.loader(4, sampler=EpochSampler(ds, seed=1), num_workers=2)
    ds._shard_reset()  # this process's handles, so the pins below are the ones read
    ds._pins = pins = _CountedPins()  # the reading threads may be idle by the check below
    batches = iter(loader)
    next(batches)
    assert pins.most > 0  # batches being read held their shards
    batches.close()  # the consumer breaks off the epoch
    assert ds._pins == {} and ds._held == {}
    # a shard deleted from the store: the epoch fails naming it, and lets go of the rest
    gone = tmp_path / "gone.pack"
    gone.mkdir()
    for f in store.iterdir():
        (gone / f.name).write_bytes(f.read_bytes())
    last = list(EpochSampler(PackedDataset(store, shuffle_window=2), seed=1))[-1]
    victim = PackedDataset(store).manifest.shards[last // PER_SHARD].file  # read last
    (gone / victim).unlink()
    bad = streamed(gone, tmp_path / "cache2", shuffle_window=2)
    seen = []
    with pytest.raises(ShardDownloadError, match=victim):
        for batch in bad.loader(4, sampler=EpochSampler(bad, seed=1), num_workers=2):
            seen += batch["label"].tolist()
    assert seen and last not in seen
    assert bad._pins == {}


@pytest.mark.parametrize("how", ["break", "close", "dropped"])
def test_an_epoch_broken_off_frees_its_read_ahead_for_the_next_reader(
    store: Path, tmp_path: Path, how: str
) -> None:
    """The shards fetched ahead of an epoch that is left unfinished (a ``break``, a crash)
    are let go at once, though the dataset lives on: another reader of the same cache,
    with ``cache_limit`` at the documented minimum, finds room and reads its epoch."""
    cache = tmp_path / "cache"
    shard = PackedDataset(store).manifest.shards[0].bytes
    limit = 6 * shard  # (shuffle_window 2 + prefetch 2 + 2) shards
    old = streamed(store, cache, cache_limit=limit, shuffle_window=2)
    batches = iter(old.loader(6, sampler=EpochSampler(old, seed=0), num_workers=1))
    for _ in range(3):
        next(batches)
    assert old._prefetcher is not None and old._prefetcher._held  # shards fetched ahead
    if how == "break":
        for n, _batch in enumerate(batches):
            if n == 1:
                break
        del batches
    elif how == "close":
        batches.close()
    else:
        del batches  # dropped unfinished: collected, as a crash's frames are
    assert old._prefetcher._held == {} and old._pins == {} and old._held == {}
    deadline = time.monotonic() + 5  # a download still running lets go when it ends
    while shards_in_use(cache) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shards_in_use(cache) == []  # every cached shard could be evicted now
    new = streamed(store, cache, cache_limit=limit, shuffle_window=2)
    assert new._remote is not None
    new._remote.wait_for_room = 5  # a stall fails in 5 s instead of two minutes
    sampler = EpochSampler(new, seed=0)
    seen = [
        int(v) for batch in new.loader(6, sampler=sampler, num_workers=1) for v in batch["label"]
    ]
    assert sorted(seen) == list(range(SHARDS * PER_SHARD))


def test_a_batch_that_needs_more_shards_than_the_cache_holds_fails_at_once(
    store: Path, tmp_path: Path
) -> None:
    """A random order over a streamed pack puts every shard in every batch: with a cache
    too small for one batch's shards, the loader says so at once instead of waiting two
    minutes for room."""
    shard = PackedDataset(store).manifest.shards[0].bytes
    ds = streamed(store, tmp_path / "cache", cache_limit=5 * shard + shard // 2)
    loader = ds.loader(24, sampler=torch.utils.data.SequentialSampler(range(48)))
    assert len(list(loader)) == 2  # in order, a batch reads 4 shards: fine
    shuffled = ds.loader(24, shuffle=True, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"reads 8 shards .*sampler=EpochSampler\(ds\)"):
        next(iter(shuffled))
    assert ds._pins == {}


def test_a_cache_too_small_for_the_shuffle_window_is_refused_when_the_epoch_starts(
    store: Path, tmp_path: Path
) -> None:
    """Reading in windows of 2 shards keeps 3 in use (the window and the shard being
    left): with room for 2 the epoch is refused at once, with the size that would do,
    instead of waiting two minutes for room that never comes. Worker processes each keep
    their own: 2 of them need room for 6, refused when the loader is made."""
    shard = PackedDataset(store).manifest.shards[0].bytes
    ds = streamed(store, tmp_path / "cache", cache_limit=2 * shard + shard // 2, shuffle_window=2)
    loader = ds.loader(4, sampler=EpochSampler(ds, seed=0), num_workers=1)
    started = time.monotonic()
    with pytest.raises(ValueError, match=rf"shuffle_window=2 .*at least {3 * shard} bytes"):
        next(iter(loader))
    assert time.monotonic() - started < 10
    ds = streamed(store, tmp_path / "cache", cache_limit=4 * shard, shuffle_window=2)
    with pytest.raises(ValueError, match=rf"2 reading processes .*at least {6 * shard} bytes"):
        ds.loader(4, sampler=EpochSampler(ds, seed=0), num_workers=2, backend="processes")


def test_a_read_ahead_the_cache_cannot_hold_is_lowered_with_a_warning(
    store: Path, tmp_path: Path
) -> None:
    """prefetch=4 with room for the window and one shard ahead: the epoch reads every
    sample, one shard ahead, and says that prefetch was lowered and how to keep it."""
    shard = PackedDataset(store).manifest.shards[0].bytes
    limit = 5 * shard + shard // 2  # (window 2 + 2) shards and one ahead
    ds = streamed(store, tmp_path / "cache", cache_limit=limit, shuffle_window=2, prefetch=4)
    assert ds._remote is not None
    ds._remote.wait_for_room = 10  # a stall fails in 10 s instead of two minutes
    loader = ds.loader(4, sampler=EpochSampler(ds, seed=0), num_workers=1)
    with pytest.warns(UserWarning, match=r"prefetch=4 .* 1 shard.*cache_limit"):
        seen = [int(v) for batch in loader for v in batch["label"]]
    assert sorted(seen) == list(range(SHARDS * PER_SHARD))
