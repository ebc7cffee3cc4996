"""Packs on Google Cloud Storage, against a real emulator (gcp-storage-emulator, loopback).

The emulator runs in this process on 127.0.0.1 (a free port). gcsfs reaches it through
``STORAGE_EMULATOR_HOST``; ``token="anon"`` skips the credential search. gcsfs's
experimental bucket-type probe (gRPC, which the emulator lacks) is switched off before
gcsfs is imported. Everything read back is compared with the same pack written locally.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from packdata_helpers import read_epochs_watching_cache, write_csv, write_images

from scramjet.data import PackedDataset, PackFormatError, pack
from scramjet.data._remote import LOG_NAME, ShardDownloadError
from scramjet.trainer.data_order import EpochSampler

ANON = {"token": "anon", "project": "test"}


class GCSServer:
    """The emulator on a free loopback port, its objects in ``data_dir`` (so that they
    survive a stop and a restart, as a real store keeps them across an outage)."""

    def __init__(self, data_dir: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self._server: Any = None

    def start(self) -> None:
        from gcp_storage_emulator import server as server_mod  # dev extra: fail, never skip

        for _ in range(50):
            try:
                self._server = server_mod.create_server(
                    "127.0.0.1", self.port, data_dir=str(self.data_dir)
                )
                self._server.start()
                return
            except OSError:  # the port may still be held right after a stop
                time.sleep(0.1)
        raise RuntimeError("could not restart the GCS emulator")

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GCSServer]:
    gcs = GCSServer(tmp_path_factory.mktemp("gcs_store"))
    gcs.start()
    yield gcs
    gcs.stop()


@pytest.fixture()
def fs(server: GCSServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A gcsfs filesystem on the emulator (the environment points every client there)."""
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    if "gcsfs" in sys.modules:  # imported earlier with the probe on: import it again
        importlib.reload(sys.modules["gcsfs"])
    import gcsfs

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.endpoint)
    return gcsfs.GCSFileSystem(skip_instance_cache=True, **ANON)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48 images 32x40 with labels 0..47 (label = row) in a folder with list.csv."""
    root = tmp_path_factory.mktemp("stream_gcs") / "imgs"
    names = write_images(root, 48)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    return root


def _pack(images: Path, dst: str | Path, shards: int = 8, **kwargs: Any) -> None:
    pack(images, images / "list.csv", dst, dtype=["int64"], height=32, width=32,
         encode="raw", shards=shards, workers=0, progress=False, **kwargs)  # fmt: skip


def _remote_pack(fs: Any, images: Path, shards: int = 8) -> str:
    bucket = f"bucket-{uuid.uuid4().hex[:10]}"
    fs.mkdir(bucket)
    url = f"gs://{bucket}/photos.pack"
    _pack(images, url, shards, storage_options=ANON)
    return url


def test_pack_to_gcs_and_stream_it_back_identical(fs: Any, images: Path, tmp_path: Path) -> None:
    url = _remote_pack(fs, images)
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(url[5:], detail=False))
    assert names == ["manifest.json"] + [f"shard-{k:05d}.h5" for k in range(8)]
    assert not (Path.cwd() / "gs:").exists()
    _pack(images, tmp_path / "local.pack")
    local = PackedDataset(tmp_path / "local.pack")
    remote = PackedDataset(url, cache_dir=tmp_path / "cache", storage_options=ANON)
    assert remote.streamed and len(remote) == len(local) == 48
    for i in (0, 5, 47, 23):
        a, b = local[i], remote[i]
        assert np.array_equal(a["image"], b["image"]) and int(a["label"]) == int(b["label"]) == i
    batch = remote[list(range(48))]
    assert batch["label"].tolist() == list(range(48))
    assert np.array_equal(batch["image"].numpy(), local[list(range(48))]["image"].numpy())
    assert remote.downloaded_bytes() == sum(s.bytes for s in remote.manifest.shards)
    with pytest.raises(FileExistsError, match="already exists"):
        _pack(images, url, storage_options=ANON)


def test_a_gcs_pack_is_read_by_a_loader_with_workers(fs: Any, images: Path, tmp_path: Path) -> None:
    url = _remote_pack(fs, images)
    ds = PackedDataset(
        url, cache_dir=tmp_path / "cache", storage_options=ANON, shuffle_window=2, prefetch=2
    )
    sampler = EpochSampler(ds, shuffle=True, seed=1)
    labels = [v for batch in ds.loader(6, sampler=sampler, num_workers=2) for v in batch["label"]]
    assert sorted(int(v) for v in labels) == list(range(48))
    log = (tmp_path / "cache" / LOG_NAME).read_text().splitlines()
    assert len(log) == 8  # one download per shard, whichever process asked first


def test_cache_limit_holds_while_streaming_from_gcs(fs: Any, images: Path, tmp_path: Path) -> None:
    url = _remote_pack(fs, images)
    probe = PackedDataset(url, cache_dir=tmp_path / "probe", storage_options=ANON)
    shard = probe.manifest.shards[0].bytes
    # the documented minimum, (window 2 + prefetch 1 + 2) shards, and half a shard more:
    # still fewer than the pack's 8, so shards are evicted and fetched again
    limit = 5 * shard + shard // 2
    cache = tmp_path / "cache"
    ds = PackedDataset(url, cache_dir=cache, cache_limit=limit, shuffle_window=2, prefetch=1,
                       storage_options=ANON)  # fmt: skip
    seen, peak = read_epochs_watching_cache(ds, cache)
    assert sorted(seen) == sorted(list(range(48)) * 2)
    assert 0 < peak <= limit
    assert ds.downloaded_bytes() > 8 * shard  # shards were evicted and fetched again


def test_a_corrupted_shard_in_the_gcs_bucket_is_named(
    fs: Any, images: Path, tmp_path: Path
) -> None:
    url = _remote_pack(fs, images)
    key = f"{url[5:]}/shard-00003.h5"
    body = bytearray(fs.cat_file(key))
    body[len(body) // 2] ^= 0x01
    fs.pipe_file(key, bytes(body))
    ds = PackedDataset(url, cache_dir=tmp_path / "cache", storage_options=ANON)
    assert int(ds[0]["label"]) == 0  # other shards read fine
    with pytest.raises(PackFormatError, match=r"shard shard-00003\.h5 of pack 'gs://.*SHA-256"):
        ds[3 * 6]
    assert not list((tmp_path / "cache").glob("*.part"))  # nothing half-written is kept
    assert not (tmp_path / "cache" / f"{ds.manifest.shards[3].sha256}.h5").exists()


def test_a_missing_gcs_shard_and_a_missing_pack_are_named(
    fs: Any, images: Path, tmp_path: Path
) -> None:
    url = _remote_pack(fs, images)
    fs.rm_file(f"{url[5:]}/shard-00001.h5")
    ds = PackedDataset(url, cache_dir=tmp_path / "cache", storage_options=ANON)
    with pytest.raises(ShardDownloadError, match=r"shard shard-00001\.h5 of pack 'gs://"):
        ds[6]
    with pytest.raises(PackFormatError, match=r"manifest\.json is missing"):
        PackedDataset(url + "-nothing", cache_dir=tmp_path / "cache", storage_options=ANON)


def test_the_gcs_emulator_stopped_mid_epoch_costs_time_only(
    server: GCSServer, fs: Any, images: Path, tmp_path: Path
) -> None:
    url = _remote_pack(fs, images)
    ds = PackedDataset(url, cache_dir=tmp_path / "cache", shuffle_window=1, prefetch=1,
                       storage_options=ANON)  # fmt: skip
    sampler = EpochSampler(ds, shuffle=True, seed=3)
    seen: list[int] = []
    t0 = 0.0
    for n, i in enumerate(sampler):
        if n == 10:  # in the second shard: stop the store for 1 s; the third is not here yet
            server.stop()
            t0 = time.monotonic()
            threading.Timer(1.0, server.start).start()
        seen.append(int(ds[i]["label"]))
    waited = time.monotonic() - t0
    assert sorted(seen) == list(range(48))  # every sample, once, intact
    assert waited >= 0.9  # the outage was met (a download waited for the store)...
    log = (tmp_path / "cache" / LOG_NAME).read_text().splitlines()
    assert len(log) == 8  # ...and cost no extra download


def test_pack_to_a_file_url_and_stream_it_back(images: Path, tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    _pack(images, url)
    assert sorted(p.name for p in (tmp_path / "store" / "p.pack").iterdir()) == (
        ["manifest.json"] + [f"shard-{k:05d}.h5" for k in range(8)]
    )
    _pack(images, tmp_path / "local.pack")
    local = PackedDataset(tmp_path / "local.pack")
    ds = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert ds.streamed
    batch, want = ds[list(range(48))], local[list(range(48))]
    assert batch["label"].tolist() == list(range(48))
    assert np.array_equal(batch["image"].numpy(), want["image"].numpy())
    assert len((tmp_path / "cache" / LOG_NAME).read_text().splitlines()) == 8
    with pytest.raises(FileExistsError, match="already exists"):
        _pack(images, url)


def test_a_lock_that_was_not_taken_never_closes_another_file(tmp_path: Path) -> None:
    """The shard cache's locks: a non-blocking lock that is refused (a shard in use, met
    by eviction) closes its descriptor once; dropping it later must not close whatever
    file has been given the same descriptor number since."""
    import gc

    from scramjet.data._remote import _Locked

    path = tmp_path / "shard.h5"
    path.write_bytes(b"x")
    holder = _Locked(path, exclusive=False)
    refused: list[Any] = []
    gc.disable()  # the refused object stays alive until this test drops it
    try:
        try:
            _Locked(path, exclusive=True, wait=False)
        except OSError as exc:
            refused.append(exc.__traceback__)  # keeps the half-made lock alive
        assert refused, "the exclusive lock should have been refused"
        with open(tmp_path / "other.bin", "wb") as other:  # takes the freed number
            refused.clear()
            gc.collect()  # the half-made lock is dropped now
            os.fstat(other.fileno())  # still open: nobody closed it behind our back
            other.write(b"still mine")
    finally:
        gc.enable()
        holder.close()
    assert (tmp_path / "other.bin").read_bytes() == b"still mine"
