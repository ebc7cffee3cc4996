"""Packing data that is not one RGB JPEG with one label: many dtypes, odd sources, the
options and augmentations such data needs, and what a user gets back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.data import PackedDataset, pack
from scramjet.data import augment as A
from scramjet.data.writer import PackError


def _images(folder: Path, n: int = 3) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        Image.fromarray(np.full((6, 6, 3), 40 * i, np.uint8)).save(folder / f"{i}.png")
        names.append(f"{i}.png")
    return names


def _pack(tmp_path: Path, csv: str, dtype: object, **kw: object) -> PackedDataset:
    src = tmp_path / "src"
    _images(src)
    (src / "list.csv").write_text(csv, encoding="utf-8")
    options: dict[str, object] = {"height": 6, "width": 6, "encode": "raw", "workers": 0}
    options.update(kw)
    pack(src, src / "list.csv", tmp_path / "out.pack", dtype=dtype, progress=False, **options)
    return PackedDataset(tmp_path / "out.pack")


# -- the CSV header ----------------------------------------------------------------------


@pytest.mark.parametrize("header", ["image,a/b,a", "image,.,x", "image,x,a/b"])
def test_column_name_that_hdf5_would_nest_is_refused_before_encoding(tmp_path, header):
    csv = f"{header}\n0.png,1,2\n1.png,3,4\n"
    with pytest.raises(ValueError, match=r"'/'") as err:
        _pack(tmp_path, csv, "int64,int64")
    assert "rename" in str(err.value)
    assert not (tmp_path / "out.pack").exists()


def test_slash_in_column_name_is_refused_even_without_a_clash(tmp_path):
    # "a/b" would be a dataset "b" in a group "a", not a column at the root of the shard
    with pytest.raises(ValueError, match=r"'a/b'"):
        _pack(tmp_path, "image,a/b\n0.png,1\n", "int64")


def test_header_split_by_another_separator_says_how_it_was_read(tmp_path):
    with pytest.raises(ValueError) as err:
        _pack(tmp_path, "image;label;score\n0.png;1;0.5\n", "int64,float32")
    text = str(err.value)
    assert "image;label;score" in text  # what was read as the one column
    assert "tab" in text and "comma" in text  # what separates columns


# -- pack() options ----------------------------------------------------------------------


@pytest.mark.parametrize("quality", ["high", 95.7, True, 0, 101])
def test_quality_that_is_not_a_whole_number_in_1_to_100_is_refused(tmp_path, quality):
    with pytest.raises(ValueError, match=r"quality must be an int from 1 to 100") as err:
        _pack(tmp_path, "image,label\n0.png,1\n", "int64", encode="jpeg", quality=quality)
    assert repr(quality) in str(err.value)


def test_quality_given_as_a_numpy_integer_is_written_as_a_json_int(tmp_path):
    ds = _pack(tmp_path, "image,label\n0.png,1\n", "int64", encode="jpeg", quality=np.int64(90))
    manifest = json.loads((ds.path / "manifest.json").read_text())
    assert manifest["columns"][0]["quality"] == 90


@pytest.mark.parametrize("option", ["keep_exif", "exif_orientation", "is_seq", "overwrite"])
def test_yes_no_option_given_a_string_is_refused(tmp_path, option):
    # "false" is a true value in Python: is_seq="false" wrote "sequence": "false"
    with pytest.raises(TypeError, match=rf"{option} must be True or False") as err:
        _pack(tmp_path, "image,label\n0.png,1\n", "int64", **{option: "false"})
    assert "'false'" in str(err.value)
    assert not (tmp_path / "out.pack").exists()


def test_yes_no_options_take_numpy_bools(tmp_path):
    ds = _pack(tmp_path, "image,label\n0.png,1\n", "int64", is_seq=np.bool_(False))
    manifest = json.loads((ds.path / "manifest.json").read_text())
    assert manifest["columns"][0]["sequence"] is False


# -- 16-bit sources ----------------------------------------------------------------------


def _pgm(path: Path, pixels: np.ndarray, maxval: int) -> None:
    height, width = pixels.shape
    header = f"P5\n{width} {height}\n{maxval}\n".encode()
    path.write_bytes(header + pixels.astype(">u2").tobytes())


@pytest.mark.parametrize("channel", [1, 3])
def test_16_bit_pgm_keeps_its_high_byte_like_other_16_bit_sources(tmp_path, channel):
    # Pillow opens a 16-bit PGM as mode "I" (not "I;16"): it was refused as out of range
    src = tmp_path / "src"
    src.mkdir()
    wide = np.random.default_rng(0).integers(0, 65536, (5, 7)).astype(np.uint16)
    _pgm(src / "depth.pgm", wide, 65535)
    (src / "list.csv").write_text("image,label\ndepth.pgm,1\n")
    pack(src, src / "list.csv", tmp_path / "p", dtype="int64", height=5, width=7,
         channel=channel, encode="raw", workers=0, progress=False)  # fmt: skip
    image = PackedDataset(tmp_path / "p")[0]["image"]
    expected = (wide >> 8).astype(np.uint8)[:, :, None]
    np.testing.assert_array_equal(image, np.repeat(expected, channel, axis=2))


def test_pgm_of_fewer_than_16_bits_is_scaled_to_8_bits(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    twelve = np.array([[0, 4095, 2048, 16]], np.uint16)
    _pgm(src / "d.pgm", twelve, 4095)
    (src / "list.csv").write_text("image,label\nd.pgm,1\n")
    pack(src, src / "list.csv", tmp_path / "p", dtype="int64", height=1, width=4,
         channel=1, encode="raw", workers=0, progress=False)  # fmt: skip
    got = PackedDataset(tmp_path / "p")[0]["image"][0, :, 0]
    np.testing.assert_array_equal(got, np.round(twelve[0] / 4095 * 65535).astype(int) >> 8)


def test_32_bit_float_image_with_values_above_255_is_still_a_bad_row(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    Image.fromarray(np.full((4, 4), 1000.0, np.float32)).save(src / "f.tif")
    (src / "list.csv").write_text("image,label\nf.tif,1\n")
    with pytest.raises(PackError, match="outside the 8-bit range"):
        pack(src, src / "list.csv", tmp_path / "p", dtype="int64", height=4, width=4,
             encode="raw", workers=0, progress=False)  # fmt: skip


# -- augmentations -----------------------------------------------------------------------


@pytest.mark.parametrize("p", [1.5, -0.1])
def test_flip_probability_outside_0_to_1_is_refused(p):
    with pytest.raises(
        ValueError, match=r"p must be a probability, a number in \[0, 1\]; received"
    ):
        A.Flip(p=p)


def test_blur_with_one_sigma_always_blurs():
    # Blur(sigma=1.0) drew sigmas from (-1, 1): half the draws left the image as it was
    img = np.random.default_rng(0).integers(0, 256, (16, 16, 3), np.uint8)
    blur = A.Blur(sigma=1.0, p=1.0, seed=0)
    assert blur.sigma == (1.0, 1.0)
    assert not any(np.array_equal(blur(img, index=i), img) for i in range(20))


@pytest.mark.parametrize(
    "make", [lambda: A.Blur(sigma=(-1.0, 1.0)), lambda: A.Blur(sigma=-0.5), lambda: A.Noise(-0.1)]
)
def test_negative_blur_sigma_or_noise_std_is_refused(make):
    with pytest.raises(ValueError, match=r">= 0"):
        make()


@pytest.mark.parametrize("size", [0, (0, 5), (4,), (4, 4.5), 2.5, "8"])
@pytest.mark.parametrize("op", [A.Resize, lambda size: A.Crop(size=size)], ids=["Resize", "Crop"])
def test_output_size_is_checked_when_the_augmentation_is_made(op, size):
    # these failed inside torch at the first sample (a DataLoader worker), or not at all
    with pytest.raises(ValueError, match=r"size must be") as err:
        op(size)
    assert repr(size) in str(err.value)


def test_same_seeded_geometry_moves_an_image_and_its_mask_alike():
    mask = np.zeros((20, 24, 1), np.uint8)
    mask[5:10, 3:9] = 200
    image = np.repeat(mask, 3, axis=2)
    geometry = A.Compose(A.Flip(), A.Crop(area=(0.3, 1.0)), A.Rotate(30), seed=1)
    for i in range(4):
        np.testing.assert_array_equal(geometry(image, index=i)[:, :, :1], geometry(mask, index=i))


# -- reading back with a transform --------------------------------------------------------


def test_batch_with_a_transform_keeps_variable_length_columns_as_lists(tmp_path):
    csv = 'image,tokens\n0.png,""\n1.png,"1 2"\n2.png,"3 4 5"\n'
    ds = _pack(tmp_path, csv, "vint32")
    plain = ds[[0, 1, 2]]
    augmented = PackedDataset(ds.path, transform={"image": A.Flip(seed=0)})
    batch = augmented[[0, 1, 2]]  # the loaders read batches the same way
    assert [t.tolist() for t in batch["tokens"]] == [t.tolist() for t in plain["tokens"]]


def test_numpy_integers_are_taken_for_the_image_size_and_shards(tmp_path: Path) -> None:
    import numpy as np

    ds = _pack(tmp_path, "image,label\n0.png,1\n1.png,0\n", ["int64"],
               height=np.int64(6), width=np.int32(5), shards=np.int64(2))  # fmt: skip
    assert tuple(ds[0]["image"].shape) == (6, 5, 3) and len(ds.manifest.shards) == 2
