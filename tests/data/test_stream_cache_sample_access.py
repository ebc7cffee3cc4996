"""``ds[i]`` on a streamed pack whose ``cache_limit`` holds ``shuffle_window + 1`` shards
(the least the reader accepts) reads every shard in turn: the dataset's own idle shards
make room for the next download instead of filling the cache while it waits for room."""

from __future__ import annotations

from pathlib import Path

import pytest
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, pack


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sample_access") / "imgs"
    names = write_images(root, 12)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    return root


def test_samples_of_every_shard_read_one_by_one(s3: S3Server, images: Path, tmp_path: Path):
    url = f"s3://{s3.new_bucket()}/photos.pack"
    pack(images, images / "list.csv", url, dtype=["int64"], height=16, width=16,
         encode="raw", shards=4, workers=0, progress=False)  # fmt: skip
    probe = PackedDataset(url, cache_dir=tmp_path / "sizes")
    limit = 2 * max(s.bytes for s in probe.manifest.shards)
    ds = PackedDataset(url, cache_dir=tmp_path / "cache", cache_limit=limit, shuffle_window=1)
    assert ds._remote is not None
    ds._remote.wait_for_room = 3  # a stall fails in 3 s instead of two minutes
    order = [*range(12), 0, 11, 5]
    assert [int(ds[i]["label"]) for i in order] == order
