"""``cache_wait``: how long a download waits for room in a full shard cache, set from
``PackedDataset`` (a real S3 server, moto on loopback, and a second process holding the
cache's shards in use)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from packdata_helpers import raw_pack_of_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset

_HOLD = """
import sys, time
from scramjet.data._remote import Retry, ShardCache, read_manifest
url, cache, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = ShardCache(url, read_manifest(url, None, Retry()), cache, limit)
held = [c.open(k) for k in (0, 1)]  # shards in use: the cache is full
print("holding", flush=True)
time.sleep(60)
"""


def _remote_pack(s3: S3Server, tmp_path: Path) -> str:
    return raw_pack_of_images(tmp_path, f"s3://{s3.new_bucket()}/p.pack", 24, shards=4)


def test_cache_wait_bounds_the_wait_for_room_held_by_another_process(
    s3: S3Server, tmp_path: Path
) -> None:
    url, cache = _remote_pack(s3, tmp_path), tmp_path / "cache"
    sizes = sorted(s.bytes for s in PackedDataset(url, cache_dir=tmp_path / "c0").manifest.shards)
    limit = sum(sizes[-2:])  # two shards: the other process holds both
    holder = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", _HOLD, url, str(cache), str(limit)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        ds = PackedDataset(url, cache_dir=cache, cache_limit=limit, shuffle_window=1,
                           cache_wait=1.5)  # fmt: skip
        assert ds._remote is not None and ds._remote.wait_for_room == 1.5
        start = time.monotonic()
        with pytest.raises(RuntimeError, match=r"no room for shard .*cache_wait=1.5 s"):
            ds[12]  # shard 2: no room while the other process reads shards 0 and 1
        assert 1.5 <= time.monotonic() - start < 8
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "2min", True])
def test_cache_wait_refuses_what_is_not_seconds(s3: S3Server, tmp_path: Path, bad: object) -> None:
    url = _remote_pack(s3, tmp_path)
    with pytest.raises(ValueError, match=r"cache_wait must be a finite number of seconds"):
        PackedDataset(url, cache_dir=tmp_path / "cache", cache_wait=bad)  # type: ignore[arg-type]


def test_cache_wait_defaults_to_two_minutes(s3: S3Server, tmp_path: Path) -> None:
    url = _remote_pack(s3, tmp_path)
    ds = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert ds._remote is not None and ds._remote.wait_for_room == 120.0
