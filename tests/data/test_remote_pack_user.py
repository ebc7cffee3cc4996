"""Packs kept in object storage, as a user who packs to a URL and streams from it meets
them: a pack replaced under a running reader, a cache folder under ``~``, a store that is
briefly unreachable while packing, and re-packing after an interrupted upload.

S3 runs against moto's real HTTP server on 127.0.0.1; the others use ``file://`` URLs,
which go through the same fsspec paths.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, PackFormatError, ShardDownloadError, pack
from scramjet.data._remote import Retry, prepare_remote_dst, upload_pack


def _images(root: Path, n: int = 24, first_label: int = 0, seed: int = 0) -> Path:
    names = write_images(root, n, seed=seed)
    rows = [[name, str(first_label + i)] for i, (name, _) in enumerate(names)]
    write_csv(root / "list.csv", ["image", "label"], rows)
    return root


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 images 32x40 labelled 0..23 (label = row), with list.csv."""
    return _images(tmp_path_factory.mktemp("remote_pack_user") / "imgs")


def _pack(images: Path, dst: str | Path, shards: int = 4, **kwargs: object) -> None:
    pack(images, images / "list.csv", dst, dtype=["int64"], height=32, width=32,
         encode="raw", shards=shards, workers=0, progress=False, **kwargs)  # type: ignore[arg-type]  # fmt: skip


def test_a_dataset_made_before_a_repack_says_the_pack_was_replaced(
    images: Path, tmp_path: Path
) -> None:
    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    _pack(images, url)
    old = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert int(old[0]["label"]) == 0
    _pack(_images(tmp_path / "new", first_label=100, seed=7), url, overwrite=True)
    with pytest.raises(PackFormatError) as err:
        old[10]  # a shard this dataset has not read yet, replaced by the re-pack
    message = str(err.value)
    # not "corrupted, re-create the pack": the pack is fine, the dataset is stale
    assert "replaced" in message and "new PackedDataset" in message and url in message
    assert int(PackedDataset(url, cache_dir=tmp_path / "cache")[10]["label"]) == 110


def test_a_cache_dir_under_home_goes_to_the_home_folder(
    images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    _pack(images, url)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert int(PackedDataset(url, cache_dir="~/packs")[5]["label"]) == 5
    assert list((tmp_path / "home" / "packs").glob("*.h5"))
    monkeypatch.setenv("SCRAMJET_CACHE_DIR", "~/from-env")
    assert int(PackedDataset(url)[6]["label"]) == 6
    assert list((tmp_path / "home" / "from-env").glob("*.h5"))
    assert not (tmp_path / "~").exists()  # no folder literally named "~"


def _outage(s3: S3Server, seconds: float) -> threading.Timer:
    s3.stop()
    timer = threading.Timer(seconds, s3.start)
    timer.start()
    return timer


def test_packing_while_the_store_is_briefly_unreachable_waits_for_it(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    url = f"s3://{s3.new_bucket()}/p.pack"
    timer = _outage(s3, 2.5)
    try:
        _pack(images, url)  # the first request (is there a pack already?) meets the outage
    finally:
        timer.join()
    ds = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert [int(ds[i]["label"]) for i in range(24)] == list(range(24))


def test_a_store_unreachable_when_packing_starts_is_named_with_the_fix(
    s3: S3Server, tmp_path: Path
) -> None:
    url = f"s3://{s3.new_bucket()}/p.pack"
    s3.stop()
    try:
        with pytest.raises(ShardDownloadError) as err:
            prepare_remote_dst(url, None, overwrite=False, retry=Retry(attempts=1))
    finally:
        s3.start()
    message = str(err.value)
    assert f"{url}/manifest.json" in message and "after 1 attempts" in message
    assert "reachable" in message


def test_an_outage_as_the_upload_starts_is_retried_and_the_pack_kept(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    """Packing can take hours: a blip of the store when the upload begins (replacing an
    old pack) must be waited out, not fail the run and drop the packed files."""
    url = f"s3://{s3.new_bucket()}/p.pack"
    _pack(images, url, shards=2)
    local = tmp_path / "local.pack"
    _pack(images, local, shards=3)
    timer = _outage(s3, 1.0)
    try:
        upload_pack(local, url, None, Retry())
    finally:
        timer.join()
    ds = PackedDataset(url, cache_dir=tmp_path / "cache")
    assert len(ds.manifest.shards) == 3
    assert [int(ds[i]["label"]) for i in range(24)] == list(range(24))


def test_a_repack_after_an_interrupted_upload_leaves_no_orphan_shards(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/p.pack"
    _pack(images, url, shards=8)
    # What an upload interrupted after its first shards leaves: the old manifest deleted,
    # shards in the bucket, no manifest naming them.
    s3.client().delete_object(Bucket=bucket, Key="p.pack/manifest.json")
    s3.client().put_object(Bucket=bucket, Key="p.pack/notes.txt", Body=b"mine")
    _pack(images, url, shards=2)
    ds = PackedDataset(url, cache_dir=tmp_path / "cache")
    names = {key.split("/", 1)[1] for key in s3.list_keys(bucket)}
    # the 6 shards no manifest names are gone; a file that is no shard is left alone
    assert names == {info.file for info in ds.manifest.shards} | {"manifest.json", "notes.txt"}
    assert [int(ds[i]["label"]) for i in range(24)] == list(range(24))


def test_a_pack_url_given_as_its_manifest_reads_like_the_pack_url(
    images: Path, tmp_path: Path
) -> None:
    """As a local pack's ``manifest.json`` path does (the URL a bucket browser shows)."""
    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    _pack(images, url)
    ds = PackedDataset(f"{url}/manifest.json", cache_dir=tmp_path / "cache")
    assert [int(ds[i]["label"]) for i in range(24)] == list(range(24))


def test_a_url_through_a_file_fails_at_once_naming_it(images: Path, tmp_path: Path) -> None:
    """A shard's URL given for the pack's: the local store answers "not a directory",
    which no retry mends (it was retried for about 45 s)."""
    import time

    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    _pack(images, url)
    start = time.monotonic()
    with pytest.raises(ShardDownloadError) as err:
        PackedDataset(f"{url}/shard-00000.h5", cache_dir=tmp_path / "cache")
    assert time.monotonic() - start < 5
    assert f"{url}/shard-00000.h5/manifest.json" in str(err.value)
    assert "NotADirectoryError" in str(err.value)


@pytest.mark.parametrize("prefetch", [-3, 2.7])
def test_a_prefetch_that_is_no_count_of_shards_is_refused(
    images: Path, tmp_path: Path, prefetch: float
) -> None:
    url = f"file://{tmp_path / 'store' / 'p.pack'}"
    _pack(images, url)
    with pytest.raises(ValueError, match="prefetch"):
        PackedDataset(url, cache_dir=tmp_path / "cache", prefetch=prefetch)  # type: ignore[arg-type]


def test_streaming_options_given_for_a_local_pack_are_not_silently_dropped(
    images: Path, tmp_path: Path
) -> None:
    _pack(images, tmp_path / "local.pack")
    with pytest.warns(UserWarning, match="cache_limit"):
        PackedDataset(tmp_path / "local.pack", cache_dir=tmp_path / "cache", cache_limit="1KB")
