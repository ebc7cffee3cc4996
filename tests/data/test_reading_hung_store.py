"""A store that accepts connections but never answers (a hung server, a network partition)
costs each download attempt its read timeout, not the timeout times every retry layer of
s3fs and botocore: the reader's own retries are the only ones, as docs/streaming.md says."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, pack
from scramjet.data._remote import Retry, ShardCache, ShardDownloadError


@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
def test_a_hung_store_fails_a_download_after_the_readers_own_attempts(
    s3: S3Server, tmp_path: Path
) -> None:
    root = tmp_path / "imgs"
    names = write_images(root, 4)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    url = f"s3://{s3.new_bucket()}/p.pack"
    pack(root, root / "list.csv", url, dtype=["int64"], height=8, width=8, encode="raw",
         shards=2, workers=0, progress=False)  # fmt: skip
    manifest = PackedDataset(url, cache_dir=tmp_path / "probe").manifest
    with socket.socket() as hung:  # listens (the kernel accepts), never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)
        options = {
            "endpoint_url": f"http://127.0.0.1:{hung.getsockname()[1]}",
            "config_kwargs": {"connect_timeout": 1, "read_timeout": 1},
        }
        cache = ShardCache(url, manifest, tmp_path / "cache", None, options, Retry(2, 0.1))
        t0 = time.monotonic()
        with pytest.raises(ShardDownloadError, match=r"shard-00000\.h5 .* after 2 attempts"):
            cache.ensure(0)
        took = time.monotonic() - t0
    # each attempt waits out a few requests (the object's size, its bytes) of 1 s each;
    # under s3fs's 5 tries x botocore's 2 attempts, the same 2 attempts took ~50 s
    assert took < 15.0, f"2 download attempts took {took:.1f} s"
    assert not list((tmp_path / "cache").glob("*.part"))
