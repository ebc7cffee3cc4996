"""Packs on object storage: written to and streamed from a real S3 server (moto, loopback).

Every test reads through a real ``s3://`` URL served by moto's HTTP server on 127.0.0.1,
with the shard cache on local disk, and compares what it reads with the local pack.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from packdata_helpers import read_epochs_watching_cache, watching_cache, write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, PackFormatError, pack
from scramjet.data._remote import LOG_NAME, ShardDownloadError
from scramjet.data._threads import ThreadedLoader
from scramjet.trainer.data_order import EpochSampler


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48 images 32x40 with labels 0..47 (label = row) in a folder with list.csv."""
    root = tmp_path_factory.mktemp("stream") / "imgs"
    names = write_images(root, 48)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    return root


def _pack(images: Path, dst: str | Path, shards: int = 8) -> None:
    pack(images, images / "list.csv", dst, dtype=["int64"], height=32, width=32,
         encode="raw", shards=shards, workers=0, progress=False)  # fmt: skip


def _remote_pack(s3: S3Server, images: Path, shards: int = 8) -> str:
    url = f"s3://{s3.new_bucket()}/photos.pack"
    _pack(images, url, shards)
    return url


def test_pack_to_s3_uploads_shards_and_manifest_and_reads_back_identical(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    url = _remote_pack(s3, images)
    bucket, prefix = url[5:].split("/", 1)
    keys = s3.list_keys(bucket)
    assert sorted(keys) == sorted(
        [f"{prefix}/manifest.json"] + [f"{prefix}/shard-{k:05d}.h5" for k in range(8)]
    )
    assert not (Path.cwd() / "s3:").exists()
    _pack(images, tmp_path / "local.pack")
    local = PackedDataset(tmp_path / "local.pack")
    remote = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert remote.streamed and len(remote) == len(local) == 48
    for i in (0, 5, 47, 23):
        a, b = local[i], remote[i]
        assert np.array_equal(a["image"], b["image"]) and int(a["label"]) == int(b["label"]) == i
    batch = remote[list(range(48))]
    assert batch["label"].tolist() == list(range(48))
    assert np.array_equal(batch["image"].numpy(), local[list(range(48))]["image"].numpy())
    with pytest.raises(FileExistsError, match="already exists"):
        _pack(images, url)


def test_a_sampler_epoch_reads_every_sample_once_and_downloads_each_shard_once(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    url = _remote_pack(s3, images)
    ds = PackedDataset(url, cache_dir=tmp_path / "cache", shuffle_window=2, prefetch=2)
    sampler = EpochSampler(ds, shuffle=True, seed=1)
    loader = ds.loader(6, sampler=sampler, num_workers=2)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        labels = [v for batch in loader for v in batch["label"].tolist()]
        assert sorted(labels) == list(range(48))
    log = (tmp_path / "cache" / LOG_NAME).read_text().splitlines()
    assert len(log) == 8 and len({line.split()[0] for line in log}) == 8
    assert ds.downloaded_bytes() == sum(s.bytes for s in ds.manifest.shards)


def test_cache_limit_holds_while_reading(s3: S3Server, images: Path, tmp_path: Path) -> None:
    url = _remote_pack(s3, images)
    shard = PackedDataset(url, cache_dir=tmp_path / "probe").manifest.shards[0].bytes
    # the documented minimum, (window 2 + prefetch 1 + 2) shards, and half a shard more:
    # still fewer than the pack's 8, so shards are evicted and fetched again
    limit = 5 * shard + shard // 2
    cache = tmp_path / "cache"
    ds = PackedDataset(url, cache_dir=cache, cache_limit=limit, shuffle_window=2, prefetch=1)
    seen, peak = read_epochs_watching_cache(ds, cache)
    assert sorted(seen) == sorted(list(range(48)) * 2)
    assert 0 < peak <= limit
    assert ds.downloaded_bytes() > 8 * shard  # shards were evicted and fetched again


def test_threads_read_from_s3_within_the_cache_limit(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    url = _remote_pack(s3, images)
    shard = PackedDataset(url, cache_dir=tmp_path / "probe").manifest.shards[0].bytes
    limit = 5 * shard + shard // 2  # as above: shards are evicted and fetched again
    cache = tmp_path / "cache"
    ds = PackedDataset(url, cache_dir=cache, cache_limit=limit, shuffle_window=2, prefetch=1)
    loader = ds.loader(4, sampler=EpochSampler(ds, seed=4), num_workers=2)
    assert isinstance(loader, ThreadedLoader)
    with watching_cache(cache) as peak:
        for epoch in range(2):
            loader.set_epoch(epoch)
            assert sorted(int(v) for b in loader for v in b["label"]) == list(range(48))
    assert 0 < peak[0] <= limit
    assert ds.downloaded_bytes() > 8 * shard


def test_a_corrupted_shard_in_the_bucket_is_named(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    url = _remote_pack(s3, images)
    bucket, prefix = url[5:].split("/", 1)
    client = s3.client()
    key = f"{prefix}/shard-00003.h5"
    body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0x01
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    ds = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert int(ds[0]["label"]) == 0  # other shards read fine
    with pytest.raises(PackFormatError, match=r"shard shard-00003\.h5 .*SHA-256"):
        ds[3 * 6]
    assert not list((tmp_path / "cache").glob("*.part"))  # nothing half-written is kept


def test_a_missing_shard_is_named(s3: S3Server, images: Path, tmp_path: Path) -> None:
    url = _remote_pack(s3, images)
    bucket, prefix = url[5:].split("/", 1)
    s3.client().delete_object(Bucket=bucket, Key=f"{prefix}/shard-00001.h5")
    ds = PackedDataset(url, cache_dir=tmp_path / "cache")
    with pytest.raises(ShardDownloadError, match=r"shard shard-00001\.h5"):
        ds[6]


def test_the_server_stopped_mid_epoch_costs_time_only(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    url = _remote_pack(s3, images)
    ds = PackedDataset(url, cache_dir=tmp_path / "cache", shuffle_window=1, prefetch=1)
    sampler = EpochSampler(ds, shuffle=True, seed=3)
    seen: list[int] = []
    t0 = 0.0
    for n, i in enumerate(sampler):
        if n == 10:  # in the second shard: stop the store for 3 s; the third is not here yet
            s3.stop()
            t0 = time.monotonic()
            threading.Timer(3.0, s3.start).start()
        seen.append(int(ds[i]["label"]))
    waited = time.monotonic() - t0
    assert sorted(seen) == list(range(48))  # every sample, once, intact
    assert waited >= 2.5  # the outage was met (a download waited for the store)...
    log = (tmp_path / "cache" / LOG_NAME).read_text().splitlines()
    assert len(log) == 8  # ...and cost no extra download


def test_file_url_streams_too(images: Path, tmp_path: Path) -> None:
    _pack(images, tmp_path / "p.pack")
    ds = PackedDataset(f"file://{tmp_path / 'p.pack'}", cache_dir=tmp_path / "cache")
    assert [int(ds[i]["label"]) for i in range(48)] == list(range(48))
    with pytest.raises(ValueError, match="cache_limit"):
        PackedDataset(f"file://{tmp_path / 'p.pack'}", cache_limit="1KB")
    with pytest.raises(PackFormatError, match=r"manifest\.json is missing"):
        PackedDataset(f"file://{tmp_path / 'nothing'}", cache_dir=tmp_path / "cache")


def test_the_trainer_trains_on_a_streamed_pack(images: Path, tmp_path: Path) -> None:
    import torch

    from scramjet import Trainer

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(32 * 32 * 3, 48)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return self.linear(image.float().flatten(1) / 255)

    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    _pack(images, url)
    ds = PackedDataset(url, cache_dir=tmp_path / "cache", shuffle_window=2)
    model = Model()
    trainer = Trainer(model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), 0.1),
                      seed=0)  # fmt: skip
    trainer.train(ds, num_epochs=2, per_device_batch_size=8)
    assert trainer.state.global_step == 12
    assert len((tmp_path / "cache" / LOG_NAME).read_text().splitlines()) == 8
