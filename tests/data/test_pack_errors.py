"""Bad rows, unsafe paths, corruption and interrupted packs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from packdata_helpers import write_csv, write_images

from scramjet.data import PackedDataset, PackError, pack
from scramjet.data.format import PackFormatError


def _pack(root, csv, dst, **kw):
    opts = {"dtype": ["int64"], "height": 8, "width": 8, "workers": 0, "progress": False}
    opts.update(kw)
    return pack(root, csv, dst, **opts)


def _no_pack_left(tmp_path, name="p"):
    assert not (tmp_path / name).exists()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(f".{name}.")]
    assert leftovers == []
    with pytest.raises(PackFormatError, match=r"manifest\.json is missing"):
        PackedDataset(tmp_path / name)


def test_missing_file_names_row_and_file(folder, tmp_path):
    root, _ = folder
    with open(root / "list.csv", "a") as fh:
        fh.write("nope.png\t1\n")
    with pytest.raises(PackError, match=r"file not found.*line 14.*'nope.png'"):
        _pack(root, root / "list.csv", tmp_path / "p")
    _no_pack_left(tmp_path)


@pytest.mark.parametrize("workers", [0, 2])
def test_undecodable_image_stops_midway_and_leaves_nothing(folder, tmp_path, workers):
    root, _ = folder
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 50)
    lines = (root / "list.csv").read_text().splitlines()
    lines.insert(7, "broken.png\t3")  # in the middle: earlier rows are already spooled
    (root / "list.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(PackError, match=r"cannot read image 'broken.png'.*line 8"):
        _pack(root, root / "list.csv", tmp_path / "p", workers=workers)
    _no_pack_left(tmp_path)


@pytest.mark.parametrize(
    "value,msg",
    [
        ("abc", "not an integer"),
        ("3.5", "not an integer"),
        ("1,2", "use the dtype 'vint64'"),
        ("", "expected one"),
    ],
)
def test_wrong_value_type_names_row(folder, tmp_path, value, msg):
    root, imgs = folder
    write_csv(root / "bad.csv", ["image", "label"], [[imgs[0][0], "1"], [imgs[1][0], value]])
    with pytest.raises(PackError, match=rf"column 'label'.*{msg}.*line 3.*'img_1.png'"):
        _pack(root, root / "bad.csv", tmp_path / "p")


def test_out_of_range_value_rejected(folder, tmp_path):
    root, imgs = folder
    write_csv(root / "bad.csv", ["image", "label"], [[imgs[0][0], "300"]])
    with pytest.raises(PackError, match="outside the range of uint8"):
        _pack(root, root / "bad.csv", tmp_path / "p", dtype=["uint8"])


@pytest.mark.parametrize("name", ["../outside.png", "sub/../../outside.png", "/etc/passwd"])
def test_path_traversal_rejected(tmp_path, name):
    write_images(tmp_path / "root", 1, size=(8, 8))
    write_images(tmp_path, 1, size=(8, 8), prefix="outside")
    (tmp_path / "outside.png").write_bytes((tmp_path / "outside_0.png").read_bytes())
    write_csv(tmp_path / "l.csv", ["image", "label"], [["img_0.png", "0"], [name, "1"]])
    with pytest.raises(PackError, match=r"escapes file_dir|absolute paths are not allowed"):
        _pack(tmp_path / "root", tmp_path / "l.csv", tmp_path / "p")
    report = _pack(tmp_path / "root", tmp_path / "l.csv", tmp_path / "p", on_error="skip")
    assert report.num_samples == 1 and [s.line for s in report.skipped] == [3]


def test_skip_reports_rows_and_keeps_shard_count(folder, tmp_path):
    root, _ = folder
    (root / "broken.png").write_bytes(b"not an image")
    with open(root / "list.csv", "a") as fh:
        fh.write("broken.png\t1\nmissing.png\t2\nimg_0.png\tx\n")
    report = _pack(root, root / "list.csv", tmp_path / "p", on_error="skip", shards=4, workers=2)
    assert report.num_samples == 12 and report.shard_sizes == [3, 3, 3, 3]
    assert sorted((s.line, s.file) for s in report.skipped) == [
        (14, "broken.png"),
        (15, "missing.png"),
        (16, "img_0.png"),
    ]
    ds = PackedDataset(tmp_path / "p")
    assert len(ds) == 12 and len(ds.manifest.extra["skipped_rows"]) == 3


def test_verify_detects_a_corrupted_shard(folder, tmp_path):
    root, _ = folder
    _pack(root, root / "list.csv", tmp_path / "p", shards=2, encode="raw")
    PackedDataset(tmp_path / "p", verify=True)
    shard = tmp_path / "p" / "shard-00001.h5"
    data = bytearray(shard.read_bytes())
    data[-100] ^= 0xFF  # flip one byte inside the pixel data, same size
    shard.write_bytes(bytes(data))
    PackedDataset(tmp_path / "p")  # cheap checks (sizes) pass
    with pytest.raises(PackFormatError, match=r"shard-00001\.h5.*SHA-256"):
        PackedDataset(tmp_path / "p", verify=True)
    shard.write_bytes(bytes(data[:-10]))
    with pytest.raises(PackFormatError, match="truncated"):
        PackedDataset(tmp_path / "p")


def test_existing_destination_needs_overwrite(folder, tmp_path):
    root, _ = folder
    _pack(root, root / "list.csv", tmp_path / "p")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        _pack(root, root / "list.csv", tmp_path / "p")
    report = _pack(root, root / "list.csv", tmp_path / "p", overwrite=True, shards=3)
    assert len(PackedDataset(tmp_path / "p").manifest.shards) == 3 == len(report.shard_sizes)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    import scramjet.data.writer as w
    real = w.file_sha256
    def slow(path):
        digest = real(path)
        open(sys.argv[3] + ".ready", "w").close()  # first shard is fully written
        time.sleep(60)
        return digest
    w.file_sha256 = slow
    w.pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=8, width=8,
           shards=3, workers=0, progress=False)
""")


def test_killed_pack_leaves_no_valid_output(folder, tmp_path):
    root, _ = folder
    dst = tmp_path / "p"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(root), str(root / "list.csv"), str(dst)]
    )
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(f"{dst}.ready"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not dst.exists()
    partial = [p for p in tmp_path.iterdir() if p.name.startswith(".p.partial-")]
    assert len(partial) == 1 and (partial[0] / "shard-00000.h5").exists()
    assert not (partial[0] / "manifest.json").exists()
    with pytest.raises(PackFormatError):
        PackedDataset(dst)
    with pytest.raises(PackFormatError):
        PackedDataset(partial[0])
