"""Two processes reading one streamed pack through one cache folder whose ``cache_limit``
holds the shuffle window of only one of them: the second to start is refused at once with
an error naming the folder and the limit that would hold both, instead of both waiting on
each other for room until one gives up (minutes later, with an error about a shard)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from packdata_helpers import write_csv, write_images

from scramjet.data import PackedDataset, pack

_READ = """
import sys
from scramjet.data import PackedDataset
from scramjet.trainer.samplers import EpochSampler
ds = PackedDataset(sys.argv[1], cache_dir=sys.argv[2], cache_limit=int(sys.argv[3]),
                   shuffle_window=2, prefetch=1)
n = 0
for epoch in range(3):
    for batch in ds.loader(4, sampler=EpochSampler(ds, seed=int(sys.argv[4])),
                           backend="processes", num_workers=1):
        n += len(batch["label"])
print("read", n, flush=True)
"""


def test_two_processes_sharing_a_cache_too_small_for_both_do_not_wait_on_each_other(
    tmp_path: Path,
) -> None:
    names = write_images(tmp_path / "imgs", 32, size=(48, 48))
    rows = [[n, str(i)] for i, (n, _) in enumerate(names)]
    write_csv(tmp_path / "imgs" / "list.csv", ["image", "label"], rows)
    pack(tmp_path / "imgs", tmp_path / "imgs" / "list.csv", tmp_path / "p.pack",
         dtype=["int64"], height=48, width=48, encode="raw", shards=8, workers=0,
         progress=False)  # fmt: skip
    url, cache = f"file://{tmp_path / 'p.pack'}", tmp_path / "cache"
    sizes = sorted(s.bytes for s in PackedDataset(url, cache_dir=tmp_path / "c0").manifest.shards)
    limit = sum(sizes[-3:])  # the smallest accepted: one shuffle window and the shard it leaves
    start = time.monotonic()
    readers = [
        subprocess.Popen(
            [sys.executable, "-W", "ignore", "-c", _READ, url, str(cache), str(limit), str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (0, 1)  # different orders: different shards in use at once
    ]
    try:
        outputs = [r.communicate(timeout=60) for r in readers]
    finally:
        for r in readers:
            r.kill()
    took = time.monotonic() - start
    assert took < 60
    for reader, (out, err) in zip(readers, outputs):
        assert "no room for shard" not in err
        if reader.returncode == 0:
            assert out.split() == ["read", "96"]
        else:  # refused at once, naming the folder and a limit that holds both windows
            assert f"cache folder {str(cache)!r}" in err, err
            assert f"at least {2 * limit} bytes" in err, err
    assert any(r.returncode == 0 for r in readers), outputs
