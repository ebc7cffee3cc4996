"""A streamed pack read by 2 torchrun ranks on one node, each with 2 reading threads (what
the Trainer builds for a pack) or 2 DataLoader worker processes.

Both ranks share one cache directory: every shard is downloaded once for the node (the
cache's download log has one line per download), and the ranks split the epoch.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from packdata_helpers import write_csv, write_images
from tests.common.torchrun import run_torchrun
from tests.tracking.s3_helpers import S3Server

from scramjet.data import pack
from scramjet.data._remote import LOG_NAME

pytestmark = pytest.mark.distributed

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch.distributed as tdist
    from scramjet.data import PackedDataset
    from scramjet.trainer.data_order import DataOrder

    url, cache, out, how = sys.argv[1:5]
    tdist.init_process_group("gloo")
    rank = tdist.get_rank()
    ds = PackedDataset(url, cache_dir=cache, shuffle_window=2, prefetch=2)
    order = DataOrder(seed=11)
    kwargs = {"batch_size": 4, "num_workers": 2}
    if how == "processes":  # a setting only worker processes take keeps the DataLoader
        kwargs["persistent_workers"] = True
    loader = order.train_loader(ds, kwargs, shuffle=True)
    assert (type(loader).__name__ == "DataLoader") == (how == "processes")
    seen = {}
    for epoch in range(2):
        batches, _ = order.epoch_batches(loader, ds, epoch=epoch, skip=0, batch_size=4)
        seen[epoch] = [int(v) for b in batches for v in b["label"]]
    json.dump(seen, open(f"{out}/rank{rank}.json", "w"))
    tdist.barrier()
    tdist.destroy_process_group()
    """
)


@pytest.fixture()
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    server = S3Server()
    server.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield server
    server.stop()


@pytest.mark.parametrize("how", ["threads", pytest.param("processes", marks=pytest.mark.slow)])
def test_two_ranks_two_workers_download_each_shard_once(
    s3: S3Server, tmp_path: Path, how: str
) -> None:
    names = write_images(tmp_path / "imgs", 64)
    rows = [[n, str(i)] for i, (n, _) in enumerate(names)]
    write_csv(tmp_path / "imgs" / "list.csv", ["image", "label"], rows)
    url = f"s3://{s3.new_bucket()}/p.pack"
    pack(tmp_path / "imgs", tmp_path / "imgs" / "list.csv", url, dtype=["int64"], height=32,
         width=32, encode="raw", shards=8, workers=0, progress=False)  # fmt: skip
    (tmp_path / "script.py").write_text(SCRIPT)
    cache = tmp_path / "cache"
    result = run_torchrun(tmp_path / "script.py", url, str(cache), str(tmp_path), how, nproc=2)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for epoch in ("0", "1"):
        a, b = ranks[0][epoch], ranks[1][epoch]
        assert len(a) == len(b) == 32 and sorted(a + b) == list(range(64))
    assert ranks[0]["0"] != ranks[0]["1"]  # a new order every epoch
    log = (cache / LOG_NAME).read_text().splitlines()
    digests = [line.split()[0] for line in log]
    assert len(digests) == 8 and len(set(digests)) == 8  # 2 epochs, 2 ranks x 2 readers
