"""A user packing a folder of images and a CSV list, and what must hold when they do."""

from __future__ import annotations

import os
import warnings

import pytest
from packdata_helpers import photo_folder, small_pack

from scramjet.data import PackedDataset, PackError

_pack, _photos = small_pack, photo_folder


# ----- overwrite replaces packs, never a file of another kind --------------------------------
def test_overwrite_refuses_a_file_that_is_not_a_pack(tmp_path):
    root = _photos(tmp_path)
    notes = tmp_path / "results.txt"
    notes.write_text("a week of work")
    with pytest.raises(FileExistsError, match=r"results\.txt.*file that is not a pack"):
        _pack(root, root / "list.csv", notes, overwrite=True)
    assert notes.read_text() == "a week of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos", "results.txt"]


def test_overwrite_still_replaces_an_hdf5_file(tmp_path):
    root = _photos(tmp_path)
    old = tmp_path / "train.hdf5"  # what nebulae's generator wrote
    old.write_bytes(b"\x89HDF\r\n\x1a\n an old file")
    _pack(root, root / "list.csv", old, overwrite=True)
    assert [int(PackedDataset(old)[i]["label"]) for i in range(3)] == [0, 1, 2]


def test_overwrite_replaces_a_dangling_link(tmp_path):
    root = _photos(tmp_path)
    dst = tmp_path / "latest.pack"
    dst.symlink_to(tmp_path / "gone.pack")  # the pack it pointed to was deleted
    with pytest.raises(FileExistsError, match="overwrite=True"):
        _pack(root, root / "list.csv", dst)
    _pack(root, root / "list.csv", dst, overwrite=True)
    assert not dst.is_symlink() and len(PackedDataset(dst)) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.pack", "photos"]


# ----- storage_options with a local dst -----------------------------------------------------
def test_storage_options_with_a_local_dst_warn(tmp_path):
    root = _photos(tmp_path)
    dst = tmp_path / "bucket" / "photos.pack"  # 's3://' forgotten
    options = {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}
    with pytest.warns(UserWarning, match=r"storage_options.*local path.*s3://"):
        _pack(root, root / "list.csv", dst, storage_options=options)
    assert len(PackedDataset(dst)) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _pack(root, root / "list.csv", tmp_path / "plain.pack")
    assert os.path.isdir(tmp_path / "plain.pack")


# ----- errors that say what is wrong -----------------------------------------------------
def test_dst_under_a_file_says_the_parent_is_a_file(tmp_path):
    root = _photos(tmp_path)
    (tmp_path / "runs").write_text("a file where a folder was meant")
    with pytest.raises(PackError, match=r"runs' is a file, not a folder"):
        _pack(root, root / "list.csv", tmp_path / "runs" / "photos.pack")
    assert (tmp_path / "runs").read_text() == "a file where a folder was meant"


def test_a_list_with_a_header_and_no_rows_says_so(tmp_path):
    root = _photos(tmp_path)
    (root / "empty.csv").write_text("image,label\n\n")
    with pytest.raises(
        PackError, match=r"empty\.csv' has a header line \(image, label\) but no rows"
    ):
        _pack(root, root / "empty.csv", tmp_path / "p")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos"]


# ----- an impossible shard count is refused before any image is encoded ---------------------
def test_more_shards_than_rows_is_refused_before_encoding(tmp_path, monkeypatch):
    from scramjet.data import writer

    root = _photos(tmp_path, n=4)
    encoded = []
    real = writer._encode_task
    monkeypatch.setattr(writer, "_encode_task", lambda task: encoded.append(task) or real(task))
    with pytest.raises(PackError, match=r"shards=5 but only 4 valid rows; pass shards <= 4"):
        _pack(root, root / "list.csv", tmp_path / "p", shards=5)
    assert encoded == []  # known from the list alone: no image was read for nothing
    (root / "list.csv").write_text("image,label\n0.png,0\nmissing.png,1\n1.png,2\n")
    with pytest.raises(PackError, match=r"1 bad rows were skipped.*line 3, 'missing\.png'"):
        _pack(root, root / "list.csv", tmp_path / "p", shards=3, on_error="skip")
    assert encoded == [] and sorted(p.name for p in tmp_path.iterdir()) == ["photos"]
