"""Processes reading one streamed pack through one cache folder each count their own
shuffle window, also when they read in the same order (the same seeded ``EpochSampler``):
separate processes are not in step, and admitted at a ``cache_limit`` that holds one window
they can wait on each other for room (one past an epoch's end, one before it), so the
second is refused at once (a real S3 server, moto on loopback, and real processes). The
``<pid>.owner`` file a process that made a limited cache leaves after it exits is removed
by the next reader that registers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from packdata_helpers import raw_pack_of_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset

_READ = """
import sys, time
from scramjet.data import PackedDataset
from scramjet.trainer.samplers import EpochSampler
ds = PackedDataset(sys.argv[1], cache_dir=sys.argv[2], cache_limit=int(sys.argv[3]),
                   shuffle_window=2, prefetch=1)
sampler = EpochSampler(ds, seed=int(sys.argv[4]))
n = 0
for epoch in range(int(sys.argv[5])):
    sampler.set_epoch(epoch)
    for batch in ds.loader(4, sampler=sampler, backend="processes", num_workers=1):
        n += len(batch["label"])
        time.sleep(float(sys.argv[6]))  # a slow training step
print("read", n, flush=True)
"""


def _packed(s3: S3Server, tmp_path: Path) -> tuple[str, int]:
    url = raw_pack_of_images(tmp_path, f"s3://{s3.new_bucket()}/p.pack", 32, shards=8)
    sizes = sorted(s.bytes for s in PackedDataset(url, cache_dir=tmp_path / "c0").manifest.shards)
    return url, sum(sizes[-3:])  # one shuffle window and the shard it leaves


def test_readers_in_the_same_order_each_need_their_window(s3: S3Server, tmp_path: Path) -> None:
    url, limit = _packed(s3, tmp_path)
    cache = tmp_path / "cache"
    args = [sys.executable, "-W", "ignore", "-c", _READ, url, str(cache), str(limit), "3"]
    first = subprocess.Popen([*args, "1", "1.0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not list((cache / ".readers").glob("*.reader")):  # the first one reads
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        second = subprocess.run([*args, "1", "0"], capture_output=True, text=True, timeout=60)
        assert first.poll() is None  # still reading: the second came while it read
    finally:
        first.kill()
        first.wait()
    assert second.returncode != 0 and "cannot hold" in second.stderr, second.stderr[-2000:]


def test_a_limited_cache_of_a_process_that_exited_leaves_no_owner_file(
    s3: S3Server, tmp_path: Path
) -> None:
    url, limit = _packed(s3, tmp_path)
    cache = tmp_path / "cache"
    made = "import sys; from scramjet.data import PackedDataset; "
    made += "PackedDataset(sys.argv[1], cache_dir=sys.argv[2], cache_limit=int(sys.argv[3]))"
    subprocess.run([sys.executable, "-c", made, url, str(cache), str(limit)], check=True)
    assert [p.suffix for p in (cache / ".readers").iterdir()] == [".owner"]
    ds = PackedDataset(url, cache_dir=cache, cache_limit=limit, shuffle_window=2)
    assert ds[0]["label"] == 0
    left = sorted(p.name for p in (cache / ".readers").iterdir())
    assert left == [f"{os.getpid()}.owner", f"{os.getpid()}.reader"]
