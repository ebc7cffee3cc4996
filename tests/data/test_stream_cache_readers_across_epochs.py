"""A run reading a streamed pack through DataLoader workers that end with each epoch
(``persistent_workers=False``) keeps its place in a shared cache folder between epochs:
a process that joins the cache between two epochs is refused, not the run that started
first (a real S3 server, moto on loopback, and real processes)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from packdata_helpers import raw_pack_of_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset

_RUN = """
import sys, time
from pathlib import Path
from scramjet.data import PackedDataset
from scramjet.trainer.samplers import EpochSampler
url, cache, limit, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
ds = PackedDataset(url, cache_dir=cache, cache_limit=limit, shuffle_window=2, prefetch=1)
sampler = EpochSampler(ds, seed=0)
loader = ds.loader(4, sampler=sampler, backend="processes", num_workers=1,
                   persistent_workers=False)
for epoch in range(2):
    sampler.set_epoch(epoch)
    n = sum(len(batch["label"]) for batch in loader)
    print("epoch", epoch, n, flush=True)
    while epoch == 0 and not go.exists():  # another process joins between the epochs
        time.sleep(0.05)
"""

_JOIN = """
import sys, time
from scramjet.data import PackedDataset
ds = PackedDataset(sys.argv[1], cache_dir=sys.argv[2], cache_limit=int(sys.argv[3]),
                   shuffle_window=2, prefetch=1)
ds[0]
print("reading", flush=True)
time.sleep(60)
"""


def test_a_run_admitted_at_its_first_epoch_finishes_when_another_process_joins_later(
    s3: S3Server, tmp_path: Path
) -> None:
    url = raw_pack_of_images(tmp_path, f"s3://{s3.new_bucket()}/p.pack", 32, shards=8)
    cache, go = tmp_path / "cache", tmp_path / "go"
    sizes = sorted(s.bytes for s in PackedDataset(url, cache_dir=tmp_path / "c0").manifest.shards)
    limit = sum(sizes[-3:])  # one shuffle window and the shard it leaves: one reader only
    args = [url, str(cache), str(limit)]
    run = subprocess.Popen([sys.executable, "-W", "ignore", "-c", _RUN, *args, str(go)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    joiner = None
    try:
        assert run.stdout is not None and run.stdout.readline().split() == ["epoch", "0", "32"]
        time.sleep(0.5)  # the epoch's worker process has ended
        joiner = subprocess.Popen([sys.executable, "-W", "ignore", "-c", _JOIN, *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert joiner.stdout is not None
        joined = joiner.stdout.readline().strip() == "reading"  # else refused: it exited
        go.touch()
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err[-2000:]
        assert out.split() == ["epoch", "1", "32"]
        assert not joined
        _, joiner_err = joiner.communicate(timeout=30)
        assert f"cache folder {str(cache)!r}" in joiner_err and "cannot hold" in joiner_err
    finally:
        for proc in (run, joiner):
            if proc is not None:
                proc.kill()
                proc.wait()
