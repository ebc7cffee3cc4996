"""Mistakes a user makes with a pack on S3 (a real moto server on 127.0.0.1), each told
at once and truly: an invalid bucket name (was retried for 40 s), an upper-case scheme,
a bucket that does not exist (was "manifest.json is missing"), a URL that lost a slash
to pathlib (was packed into a local folder named "s3:"), a shard a re-pack removed (was
"check the URL and credentials"); and reading without an epoch sampler under a
cache_limit smaller than the shuffle window goes on (it stalled on its own shards)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, PackFormatError, pack
from scramjet.data._remote import ShardDownloadError


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mistakes") / "imgs"
    names = write_images(root, 16)
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    return root


def _pack(images: Path, dst: str | Path, shards: int = 4, **kwargs: object) -> None:
    pack(images, images / "list.csv", dst, dtype=["int64"], height=16, width=16,
         encode="raw", shards=shards, workers=0, progress=False, **kwargs)  # fmt: skip


def test_an_invalid_bucket_name_fails_at_once(s3: S3Server, images: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(ShardDownloadError, match="Invalid bucket name"):
        PackedDataset("s3://bad!bucket/x.pack", cache_dir=tmp_path / "c")
    with pytest.raises(ShardDownloadError, match="Invalid bucket name"):
        _pack(images, "s3://bad!bucket/x.pack")
    assert time.monotonic() - started < 10  # no retries: 9 attempts took about 40 s


def test_an_upper_case_scheme_is_the_same_url(s3: S3Server, images: Path, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    _pack(images, f"S3://{bucket}/x.pack")
    assert sorted(s3.list_keys(bucket))[0] == "x.pack/manifest.json"
    ds = PackedDataset(f"S3://{bucket}/x.pack", cache_dir=tmp_path / "c")
    assert [int(ds[i]["label"]) for i in range(16)] == list(range(16))


def test_a_missing_bucket_is_named_as_the_stores_answer(s3: S3Server, tmp_path: Path) -> None:
    with pytest.raises(ShardDownloadError, match=r"NoSuchBucket|does not exist") as caught:
        PackedDataset("s3://no-such-bucket-zz9/photos.pack", cache_dir=tmp_path / "c")
    assert isinstance(caught.value, OSError) and "bucket exists" in str(caught.value)


def test_a_url_that_lost_a_slash_is_refused(
    images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for dst in ("s3:/bucket/x.pack", Path("s3://bucket/x.pack")):
        with pytest.raises(ValueError, match=r"lost a slash.*'s3://bucket/x.pack'"):
            _pack(images, dst)
        with pytest.raises(ValueError, match="lost a slash"):
            PackedDataset(dst)
    assert not (tmp_path / "s3:").exists()


def test_a_shard_a_repack_removed_is_named_as_replaced(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    url = f"s3://{s3.new_bucket()}/x.pack"
    _pack(images, url, shards=4)
    old = PackedDataset(url, cache_dir=tmp_path / "c")
    _pack(images, url, shards=2, overwrite=True)  # shards 2 and 3 are removed
    with pytest.raises(PackFormatError, match=r"replaced \(re-packed\).*Make a new"):
        old[15]


def test_plain_reading_under_a_cache_limit_below_the_shuffle_window_goes_on(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    # ds[i] and a plain DataLoader read one shard after another: the reader holds what the
    # limit fits (it held the 9 shards of the default window and waited for its own room)
    url = f"s3://{s3.new_bucket()}/x.pack"
    _pack(images, url, shards=8)
    shard = max(s.bytes for s in PackedDataset(url, cache_dir=tmp_path / "c0").manifest.shards)
    ds = PackedDataset(url, cache_dir=tmp_path / "c1", cache_limit=4 * shard, cache_wait=30)
    started = time.monotonic()
    loader = torch.utils.data.DataLoader(ds, batch_size=4)
    assert [int(v) for batch in loader for v in batch["label"]] == list(range(16))
    assert [int(ds[i]["label"]) for i in (15, 0, 9)] == [15, 0, 9]
    assert time.monotonic() - started < 10  # not cache_wait
    assert (
        ds.manifest and sum(f.stat().st_size for f in (tmp_path / "c1").rglob("*.h5")) <= 4 * shard
    )
