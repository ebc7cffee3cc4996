"""Round trips and column types of scramjet.data.pack / PackedDataset."""

from __future__ import annotations

import io
import json

import h5py
import numpy as np
import pytest
import torch
from packdata_helpers import write_csv, write_images
from PIL import Image

from scramjet.data import PackedDataset, pack
from scramjet.data.format import PackFormatError


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize("encode", ["raw", "png"])
def test_lossless_round_trip_is_bit_exact(folder, tmp_path, encode):
    root, imgs = folder
    report = pack(
        root,
        root / "list.csv",
        tmp_path / "p",
        dtype=["int64"],
        height=32,
        width=40,
        encode=encode,
        shards=2,
        workers=2,
        progress=False,
    )
    assert report.num_samples == 12 and report.shard_sizes == [6, 6]
    ds = PackedDataset(tmp_path / "p", verify=True)
    for i, (_, arr) in enumerate(imgs):
        sample = ds[i]
        assert sample["image"].dtype == np.uint8
        np.testing.assert_array_equal(sample["image"], arr)
        assert sample["label"] == i % 4


@pytest.mark.parametrize("decoder", ["pil", "simplejpeg"])
def test_jpeg_round_trip_psnr(folder, tmp_path, decoder):
    root, imgs = folder
    pack(
        root,
        root / "list.csv",
        tmp_path / "p",
        dtype=["int64"],
        height=32,
        width=40,
        encode="jpeg",
        quality=95,
        workers=0,
        progress=False,
    )
    ds = PackedDataset(tmp_path / "p", decoder=decoder)
    assert ds.decoder == decoder
    values = [psnr(ds[i]["image"], arr) for i, (_, arr) in enumerate(imgs)]
    assert min(values) >= 30.0, values


def test_rgb_order_is_kept(tmp_path):
    """A pure red source stays red (no BGR swap) through every encoding and decoder."""
    (tmp_path / "src").mkdir()
    red = np.zeros((16, 16, 3), np.uint8)
    red[..., 0] = 255
    Image.fromarray(red).save(tmp_path / "src" / "red.png")
    Image.fromarray(red).convert("P").save(tmp_path / "src" / "pal.png")  # palette input
    write_csv(tmp_path / "l.csv", ["image"], [["red.png"], ["pal.png"]])
    for enc in ("raw", "png", "jpeg"):
        pack(
            tmp_path / "src",
            tmp_path / "l.csv",
            tmp_path / enc,
            dtype=[],
            height=16,
            width=16,
            encode=enc,
            workers=0,
            progress=False,
        )
        for dec in ("pil", "simplejpeg"):
            for i in range(2):
                px = PackedDataset(tmp_path / enc, decoder=dec)[i]["image"].astype(int)
                assert px[..., 0].min() > 240 and px[..., 1:].max() < 15, (enc, dec)


def test_every_dtype_round_trips(tmp_path):
    imgs = write_images(tmp_path / "imgs", 3, size=(8, 8))
    dtypes = [
        "bool",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
        "str",
        "vint64",
        "vfloat32",
        "vbool",
        "vuint8",
    ]
    header = ["image", *[f"c_{d}" for d in dtypes]]
    rows = []
    for i, (name, _) in enumerate(imgs):
        rows.append(
            [
                name,
                "False" if i != 1 else "true",
                "255",
                "65535",
                "4294967295",
                str(2**64 - 1 - i),  # the largest uint64 in the first row
                "-128",
                "-7",
                str(-(2**31)),
                str(2**40 + i),
                "0.5",
                "1.25",
                "3.5",
                f"név {i}",
                "1,2,3",
                "0.5 1.5",
                "0,1,False",
                "",
            ]
        )
    write_csv(tmp_path / "l.csv", header, rows)
    pack(
        tmp_path / "imgs",
        tmp_path / "l.csv",
        tmp_path / "p",
        dtype=dtypes,
        height=8,
        width=8,
        shards=3,
        workers=0,
        progress=False,
    )  # shards of one row each
    ds = PackedDataset(tmp_path / "p", verify=True)
    assert len(ds.manifest.shards) == 3 and all(s.samples == 1 for s in ds.manifest.shards)
    for i in range(3):
        s = ds[i]
        assert s["c_bool"] is np.bool_(i == 1) or bool(s["c_bool"]) == (i == 1)
        assert s["c_uint8"] == 255 and s["c_uint8"].dtype == np.uint8
        assert s["c_uint16"] == 65535 and s["c_uint32"] == 4294967295
        assert s["c_uint64"] == 2**64 - 1 - i and s["c_uint64"].dtype == np.uint64
        assert s["c_int8"] == -128 and s["c_int16"] == -7 and s["c_int32"] == -(2**31)
        assert s["c_int64"] == 2**40 + i and s["c_int64"].dtype == np.int64
        assert s["c_float16"] == 0.5 and s["c_float16"].dtype == np.float16
        assert s["c_float32"] == 1.25 and s["c_float64"] == 3.5
        assert s["c_str"] == f"név {i}"
        np.testing.assert_array_equal(s["c_vint64"], [1, 2, 3])  # every row has length 3
        np.testing.assert_array_equal(s["c_vfloat32"], np.float32([0.5, 1.5]))
        np.testing.assert_array_equal(s["c_vbool"], [False, True, False])
        assert s["c_vuint8"].shape == (0,)
    batch = ds[[2, 0]]
    assert batch["c_int64"].tolist() == [2**40 + 2, 2**40]
    assert batch["c_uint64"].dtype == torch.uint64
    assert batch["c_uint64"].numpy().tolist() == [2**64 - 3, 2**64 - 1]
    assert batch["c_bool"].tolist() == [False, False] and batch["c_str"] == ["név 2", "név 0"]


@pytest.mark.parametrize(
    "text,expected",
    [("False", False), ("0", False), ("false", False), ("no", False), ("True", True), ("1", True)],
)
def test_booleans_parse_strictly(tmp_path, text, expected):
    write_images(tmp_path / "i", 1, size=(4, 4))
    write_csv(tmp_path / "l.csv", ["image", "flag"], [["img_0.png", text]])
    pack(
        tmp_path / "i",
        tmp_path / "l.csv",
        tmp_path / "p",
        dtype=["bool"],
        height=4,
        width=4,
        workers=0,
        progress=False,
    )
    assert bool(PackedDataset(tmp_path / "p")[0]["flag"]) is expected


@pytest.mark.parametrize("n,shards", [(12, 1), (12, 5), (12, 12), (7, 3)])
def test_exactly_the_requested_shards_balanced(folder, tmp_path, n, shards):
    root, _ = folder
    lines = (root / "list.csv").read_text().splitlines()[: n + 1]
    (root / "sub.csv").write_text("\n".join(lines) + "\n")
    report = pack(
        root,
        root / "sub.csv",
        tmp_path / "p",
        dtype=["int64"],
        height=8,
        width=8,
        encode="raw",
        shards=shards,
        workers=0,
        progress=False,
    )
    files = sorted(p.name for p in (tmp_path / "p").glob("shard-*.h5"))
    assert len(files) == shards == len(report.shard_sizes)
    assert sum(report.shard_sizes) == n
    assert max(report.shard_sizes) - min(report.shard_sizes) <= 1
    ds = PackedDataset(tmp_path / "p")
    assert [int(ds[i]["label"]) for i in range(n)] == [i % 4 for i in range(n)]


def test_more_shards_than_rows_is_an_error(folder, tmp_path):
    root, _ = folder
    with pytest.raises(ValueError, match="shards=13 but only 12"):
        pack(
            root,
            root / "list.csv",
            tmp_path / "p",
            dtype=["int64"],
            height=8,
            width=8,
            shards=13,
            workers=0,
            progress=False,
        )
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("encode", ["raw", "jpeg"])
def test_sequences_round_trip(tmp_path, encode):
    frames = write_images(tmp_path / "v", 9, size=(16, 16))
    names = [n for n, _ in frames]
    rows = [[",".join(names[0:4]), "1"], [",".join(names[4:6]), "0"], [",".join(names[6:9]), "2"]]
    write_csv(tmp_path / "l.csv", ["frames", "label"], rows, sep=",")
    pack(
        tmp_path / "v",
        tmp_path / "l.csv",
        tmp_path / "p",
        dtype=["int64"],
        height=16,
        width=16,
        encode=encode,
        is_seq=True,
        shards=2,
        workers=2,
        progress=False,
    )
    ds = PackedDataset(tmp_path / "p")
    for i, (start, stop) in enumerate([(0, 4), (4, 6), (6, 9)]):
        seq = ds[i]["frames"]
        assert seq.shape == (stop - start, 16, 16, 3)
        for t in range(stop - start):
            ref = frames[start + t][1]
            if encode == "raw":
                np.testing.assert_array_equal(seq[t], ref)
            else:
                assert psnr(seq[t], ref) > 30
    assert ds[[1, 0]]["label"].tolist() == [0, 1]


def test_grayscale_resize_and_exif(tmp_path):
    (tmp_path / "s").mkdir()
    exif = Image.Exif()
    exif[0x010F] = "scramjet-camera"  # Make
    Image.fromarray(np.full((30, 20, 3), 90, np.uint8)).save(tmp_path / "s" / "a.jpg", exif=exif)
    write_csv(tmp_path / "l.csv", ["image"], [["a.jpg"]])
    for keep in (True, False):
        out = tmp_path / f"p{keep}"
        pack(
            tmp_path / "s",
            tmp_path / "l.csv",
            out,
            dtype=[],
            height=12,
            width=10,
            channel=1,
            keep_exif=keep,
            workers=0,
            progress=False,
        )
        ds = PackedDataset(out)
        assert ds[0]["image"].shape == (12, 10, 1)
        with h5py.File(out / "shard-00000.h5") as h5:
            blob = bytes(h5["image"][()])
        make = Image.open(io.BytesIO(blob)).getexif().get(0x010F)
        assert (make == "scramjet-camera") is keep


def test_manifest_is_json_and_describes_the_pack(folder, tmp_path):
    root, _ = folder
    pack(
        root,
        root / "list.csv",
        tmp_path / "p",
        dtype=["int64"],
        height=8,
        width=8,
        shards=2,
        encode="png",
        workers=0,
        progress=False,
    )
    data = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert data["format"] == "scramjet-pack" and data["version"] == 1
    assert data["num_samples"] == 12
    assert data["columns"][0]["encoding"] == "png" and data["columns"][1]["dtype"] == "int64"
    assert [s["samples"] for s in data["shards"]] == [6, 6]
    assert all(len(s["sha256"]) == 64 for s in data["shards"])
    data["version"] = 99
    (tmp_path / "p" / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(PackFormatError, match="version 99"):
        PackedDataset(tmp_path / "p")
