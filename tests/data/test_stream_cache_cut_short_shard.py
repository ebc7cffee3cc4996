"""A streamed pack's cached shard cut short on local disk (a crash during a copy, a full
disk) is noticed by its size, discarded and downloaded again (real S3 server, moto)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, pack


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 images 32x40 with labels 0..11 (label = row) in a folder with list.csv."""
    root = tmp_path_factory.mktemp("cut") / "imgs"
    names = write_images(root, 12)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    return root


def _remote_pack(s3: S3Server, images: Path) -> str:
    url = f"s3://{s3.new_bucket()}/p.pack"
    pack(images, images / "list.csv", url, dtype=["int64"], height=32, width=32,
         encode="raw", shards=3, workers=0, progress=False)  # fmt: skip
    return url


@pytest.mark.parametrize("cut", ["half", "empty", "longer"])
def test_a_cached_shard_of_the_wrong_size_is_fetched_again(
    s3: S3Server, images: Path, tmp_path: Path, cut: str
) -> None:
    url = _remote_pack(s3, images)
    cache = tmp_path / "cache"
    first = PackedDataset(url, cache_dir=cache, prefetch=0)
    expected = first[list(range(12))]
    shard = first.manifest.shards[1]
    cached = cache / f"{shard.sha256}.h5"
    assert cached.stat().st_size == shard.bytes
    data = cached.read_bytes()
    cached.write_bytes({"half": data[: len(data) // 2], "empty": b"", "longer": data + b"x"}[cut])

    again = PackedDataset(url, cache_dir=cache, prefetch=0)
    batch = again[list(range(12))]
    assert batch["label"].tolist() == list(range(12))
    assert np.array_equal(batch["image"].numpy(), expected["image"].numpy())
    assert cached.read_bytes() == data  # the cut file was replaced by the whole shard
    assert again.downloaded_bytes() == sum(s.bytes for s in first.manifest.shards) + shard.bytes
