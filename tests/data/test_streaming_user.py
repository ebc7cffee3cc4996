"""Streaming packs from object storage, as a user of ``pack(dst=URL)`` and
``PackedDataset(URL, cache_dir=..., cache_limit=...)`` meets it: damaged objects in the
store, re-packing over a URL, a cache smaller than the pack.

The S3 tests run against moto's real HTTP server on 127.0.0.1; the others use ``file://``
URLs, which go through the same fsspec download path.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from pathlib import Path

import pytest
from packdata_helpers import watching_cache, write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, PackError, PackFormatError, ShardDownloadError, pack
from scramjet.trainer.data_order import EpochSampler


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 images 32x40 with labels 0..23 (label = row) in a folder with list.csv."""
    root = tmp_path_factory.mktemp("stream_user") / "imgs"
    names = write_images(root, 24)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    return root


def _pack(images: Path, dst: str | Path, shards: int = 4, **kwargs: object) -> None:
    pack(images, images / "list.csv", dst, dtype=["int64"], height=32, width=32,
         encode="raw", shards=shards, workers=0, progress=False, **kwargs)  # type: ignore[arg-type]  # fmt: skip


def test_a_shard_replaced_by_a_huge_object_never_fills_the_cache_beyond_its_limit(
    images: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store" / "p.pack"
    _pack(images, f"file://{store}")
    ds = PackedDataset(f"file://{store}", cache_dir=tmp_path / "cache", cache_limit="200KB")
    shard = ds.manifest.shards[1]
    (store / shard.file).write_bytes(b"\0" * (48 << 20))  # 48 MB where ~18 kB belong
    with watching_cache(tmp_path / "cache") as peak, pytest.raises(PackFormatError) as err:
        ds[6]
    assert peak[0] <= 200_000  # the download stopped at the manifest's size
    assert f"shard {shard.file} of pack" in str(err.value)
    assert f"longer than the manifest's {shard.bytes} bytes" in str(err.value)
    assert not list((tmp_path / "cache").glob("*.part"))


def test_a_failed_repack_with_overwrite_leaves_the_old_pack_readable(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/p.pack"
    _pack(images, url)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "list.csv").write_text("image,label\nmissing.png,1\n")
    with pytest.raises(PackError, match=r"missing\.png"):  # fails before anything is uploaded
        pack(bad, bad / "list.csv", url, dtype=["int64"], height=32, width=32, shards=1,
             workers=0, progress=False, overwrite=True)  # fmt: skip
    ds = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert [int(ds[i]["label"]) for i in range(24)] == list(range(24))
    _pack(images, url, shards=2, overwrite=True)  # a re-pack that succeeds replaces it
    new = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert len(new.manifest.shards) == 2 and int(new[23]["label"]) == 23
    # the old pack's other shards are removed from the bucket, not left to be paid for
    names = {key.split("/")[-1] for key in s3.list_keys(bucket)}
    assert names == {info.file for info in new.manifest.shards} | {"manifest.json"}


@pytest.fixture()
def no_credentials(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The S3 server, with no AWS credentials to be found anywhere."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return s3


def test_reading_without_credentials_names_the_pack_and_the_fix(
    no_credentials: S3Server, tmp_path: Path
) -> None:
    url = f"s3://{no_credentials.new_bucket()}/p.pack"
    with pytest.raises(ShardDownloadError) as err:
        PackedDataset(url, cache_dir=tmp_path / "cache")
    message = str(err.value)
    assert f"{url}/manifest.json" in message and "credentials" in message
    assert "storage_options" in message


def test_packing_to_a_bucket_that_does_not_exist_names_it_and_the_fix(
    s3: S3Server, images: Path
) -> None:
    url = "s3://no-such-bucket-here/p.pack"
    with pytest.raises(ShardDownloadError) as err:
        _pack(images, url)
    message = str(err.value)
    assert url in message and "bucket" in message and "create" in message


def _read_in_a_child(ds: PackedDataset, index: int) -> None:
    ds[index]


def test_a_download_left_by_a_killed_reader_does_not_take_room_in_the_cache(
    images: Path, tmp_path: Path
) -> None:
    import multiprocessing

    store = tmp_path / "store"
    _pack(images, f"file://{store}/a.pack")
    _pack(images, f"file://{store}/b.pack", shards=2)
    cache = tmp_path / "cache"
    first = PackedDataset(f"file://{store}/a.pack", cache_dir=cache)
    blocked = store / "a.pack" / first.manifest.shards[0].file
    blocked.unlink()
    os.mkfifo(blocked)  # a download that never ends: its reader is killed in the middle
    child = multiprocessing.get_context("fork").Process(target=_read_in_a_child, args=(first, 0))
    child.start()
    part = cache / f"{first.manifest.shards[0].sha256}.part"
    full = first.manifest.shards[0].bytes
    for _ in range(500):  # allocated at its full size: the download itself has started
        if part.exists() and part.stat().st_size == full:
            break
        child.join(0.01)
    child.kill()
    child.join()
    assert part.exists()  # what a reader killed mid-download (OOM, SIGKILL) leaves
    # room for one shard of another pack, not for that shard and the abandoned download
    shard = PackedDataset(f"file://{store}/b.pack", cache_dir=tmp_path / "c2").manifest.shards[0]
    limit = shard.bytes + part.stat().st_size // 2
    second = PackedDataset(f"file://{store}/b.pack", cache_dir=cache, cache_limit=limit)
    second._remote.wait_for_room = 1.0  # type: ignore[union-attr]  # fail fast if stuck
    assert [int(second[i]["label"]) for i in range(shard.samples)] == list(range(shard.samples))
    assert not part.exists()


def _locked_shard_bytes(cache: Path) -> int:
    """Bytes of distinct shards (finished or downloading) in ``cache``, counted under the
    cache's own lock, so that no room is being made mid-count."""
    fd = os.open(cache / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        sizes: dict[str, int] = {}
        for entry in os.scandir(cache):
            if entry.name.endswith((".h5", ".part")):
                with contextlib.suppress(FileNotFoundError):
                    stem = entry.name.rsplit(".", 1)[0]  # a shard seen as .part and .h5
                    sizes[stem] = max(sizes.get(stem, 0), entry.stat().st_size)
        return sum(sizes.values())
    finally:
        os.close(fd)


def test_readers_sharing_a_cache_never_exceed_its_limit_together(tmp_path: Path) -> None:
    root = tmp_path / "imgs"
    names = write_images(root, 96)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    _pack(root, url, shards=32)
    shard = PackedDataset(url, cache_dir=tmp_path / "probe").manifest.shards[0].bytes
    cache = tmp_path / "cache"
    cache.mkdir()
    limit = 3 * (2 + 4 + 2) * shard  # the documented room for each of 3 readers, < 32 shards
    results: list[bool] = []

    def read(seed: int) -> None:  # one reader of its own, as another process would have
        ds = PackedDataset(url, cache_dir=cache, cache_limit=limit, shuffle_window=2,
                           prefetch=4)  # fmt: skip
        sampler, seen = EpochSampler(ds, seed=seed), []
        for epoch in range(3):
            sampler.set_epoch(epoch)
            seen += [
                int(v) for b in ds.loader(3, sampler=sampler, num_workers=2) for v in b["label"]
            ]
        results.append(sorted(seen) == sorted(list(range(96)) * 3))

    with watching_cache(cache, _locked_shard_bytes) as peak:
        readers = [threading.Thread(target=read, args=(seed,)) for seed in range(3)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
    assert results == [True, True, True]
    assert peak[0] <= limit


def test_a_store_gone_for_good_is_retried_once_per_shard_not_again_by_the_reader(
    s3: S3Server, images: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from scramjet.data._remote import Retry

    url = f"s3://{s3.new_bucket()}/p.pack"
    _pack(images, url)
    ds = PackedDataset(url, cache_dir=tmp_path / "cache", shuffle_window=1, prefetch=1)
    assert ds._remote is not None
    ds._remote.retry = Retry(attempts=1)  # 9 attempts take ~45 s
    caplog.set_level(logging.INFO, logger="scramjet.data._remote")
    try:
        with pytest.raises(ShardDownloadError, match="after 1 attempts") as err:
            for n, i in enumerate(EpochSampler(ds, seed=0)):
                if n == 2:  # in the first shard: the read-ahead of the second one fails
                    s3.stop()
                ds[i]
    finally:
        s3.start()
    shard = str(err.value).split("cannot download shard ")[1].split()[0]
    attempts = [r for r in caplog.records if f"{shard} failed" in r.getMessage()]
    # the reader waited for the read-ahead's attempts: it reports their failure, rather
    # than making the user wait for as many attempts again
    assert len(attempts) == 1


def test_a_storage_option_the_store_does_not_know_fails_at_once_naming_it(
    s3: S3Server, tmp_path: Path
) -> None:
    import time

    url = f"s3://{s3.new_bucket()}/p.pack"
    start = time.monotonic()
    with pytest.raises(ShardDownloadError) as err:
        PackedDataset(url, cache_dir=tmp_path / "cache", storage_options={"retry_count": 1})
    assert time.monotonic() - start < 5  # not retried for ~45 s like an unreachable store
    assert "retry_count" in str(err.value) and "storage_options" in str(err.value)


def test_cache_limit_takes_whole_numbers_of_any_kind_and_refuses_fractions() -> None:
    import numpy as np

    from scramjet.data._remote import parse_size

    assert parse_size(20e9) == 20_000_000_000
    assert parse_size(np.int64(500)) == 500
    assert parse_size("1.5KB") == 1500
    for bad in (0.5, -1, True, "lots"):
        with pytest.raises(ValueError, match="positive number of bytes"):
            parse_size(bad)
