"""Downloads left in a shard cache by readers killed in the middle (OOM, SIGKILL): the next
reader to open the cache removes them, with or without ``cache_limit``, and leaves alone
the download of a reader that is still alive."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packdata_helpers import write_csv, write_images
from tests.tracking.s3_helpers import S3Server

from scramjet.data import PackedDataset, pack

_READ_ON_CUE = """
import sys
from scramjet.data import PackedDataset
ds = PackedDataset(sys.argv[1], cache_dir=sys.argv[2])
print("open", flush=True)
sys.stdin.readline()
ds[0]
"""


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 images with labels 0..7 (label = row) in a folder with list.csv."""
    root = tmp_path_factory.mktemp("abandoned") / "imgs"
    names = write_images(root, 8, size=(16, 16))
    write_csv(
        root / "list.csv", ["image", "label"], [[n, str(i)] for i, (n, _) in enumerate(names)]
    )
    return root


def _pack(images: Path, dst: str) -> None:
    pack(images, images / "list.csv", dst, dtype=["int64"], height=16, width=16,
         encode="raw", shards=2, workers=0, progress=False)  # fmt: skip


def _wait_for(path: Path, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


@pytest.mark.slow  # a fresh interpreter importing torch, and the server stopped and started
def test_a_reader_killed_mid_download_from_s3_leaves_nothing_without_a_cache_limit(
    s3: S3Server, images: Path, tmp_path: Path
) -> None:
    url = f"s3://{s3.new_bucket()}/photos.pack"
    _pack(images, url)
    cache = tmp_path / "cache"
    part = cache / f"{PackedDataset(url, cache_dir=tmp_path / 'c2').manifest.shards[0].sha256}.part"
    child = subprocess.Popen(
        [sys.executable, "-c", _READ_ON_CUE, url, str(cache)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
        s3.stop()  # the download waits on a store gone quiet, retrying: killed meanwhile
        try:
            assert child.stdin is not None
            child.stdin.write("read\n")
            child.stdin.flush()
            _wait_for(part)
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            s3.start()
        assert part.exists()  # what a reader killed mid-download leaves
        ds = PackedDataset(url, cache_dir=cache)  # no cache_limit: nothing is evicted
        assert not part.exists(), "the killed reader's download stays in the cache"
        assert int(ds[0]["label"]) == 0
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def _read_in_a_child(ds: PackedDataset) -> None:
    ds[0]


def test_opening_a_cache_keeps_the_download_of_a_live_reader(images: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    _pack(images, f"file://{store}/a.pack")
    cache = tmp_path / "cache"
    first = PackedDataset(f"file://{store}/a.pack", cache_dir=cache)
    blocked = store / "a.pack" / first.manifest.shards[0].file
    blocked.unlink()
    os.mkfifo(blocked)  # a download that does not end while the test looks at it
    child = multiprocessing.get_context("fork").Process(target=_read_in_a_child, args=(first,))
    child.start()
    try:
        part = cache / f"{first.manifest.shards[0].sha256}.part"
        _wait_for(part)
        PackedDataset(f"file://{store}/a.pack", cache_dir=cache)
        assert part.exists() and child.is_alive()
    finally:
        child.kill()
        child.join()


def test_a_reader_killed_mid_download_leaves_nothing_once_the_cache_opens_again(
    images: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    _pack(images, f"file://{store}/a.pack")
    cache = tmp_path / "cache"
    first = PackedDataset(f"file://{store}/a.pack", cache_dir=cache)
    blocked = store / "a.pack" / first.manifest.shards[0].file
    blocked.rename(store / "kept.h5")
    os.mkfifo(blocked)  # a download that never ends: its reader is killed in the middle
    child = multiprocessing.get_context("fork").Process(target=_read_in_a_child, args=(first,))
    child.start()
    part = cache / f"{first.manifest.shards[0].sha256}.part"
    try:
        _wait_for(part)
    finally:
        child.kill()
        child.join()
    assert part.exists()  # what a reader killed mid-download (OOM, SIGKILL) leaves
    blocked.unlink()
    (store / "kept.h5").rename(blocked)
    ds = PackedDataset(f"file://{store}/a.pack", cache_dir=cache)  # no cache_limit
    assert not part.exists(), "the killed reader's download stays in the cache"
    assert int(ds[0]["label"]) == 0
