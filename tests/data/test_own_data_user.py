"""A practitioner's own, varied data packed and read back: float and odd images, lists
with unusual cells, and what comes back from the pack, the loaders and nebulae's API."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.data import PackedDataset, PackError, pack


def _one_image(tmp_path: Path, img: Image.Image, name: str = "x.tif") -> tuple[Path, Path]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    img.save(src / name)
    (src / "list.csv").write_text(f"image,label\n{name},1\n")
    return src, src / "list.csv"


def _pack(src: Path, csv: Path, dst: Path, **kw: object) -> PackedDataset:
    opts: dict[str, object] = {"dtype": ["int64"], "height": 4, "width": 6, "channel": 1,
                               "encode": "raw", "workers": 0, "progress": False}  # fmt: skip
    opts.update(kw)
    pack(src, csv, dst, **opts)  # type: ignore[arg-type]
    return PackedDataset(dst)


# ----- float images -----------------------------------------------------------------------
def test_float_image_scaled_to_0_1_is_a_bad_row_not_a_black_image(tmp_path):
    values = np.random.default_rng(0).random((4, 6)).astype(np.float32)  # 0..1, fractions
    src, csv = _one_image(tmp_path, Image.fromarray(values, "F"))
    with pytest.raises(PackError, match=r"0\.\.1 image.*multiply it by 255"):
        _pack(src, csv, tmp_path / "p")


def test_float_image_in_0_255_is_rounded_to_the_nearest_level(tmp_path):
    values = np.array([[0.4, 0.6, 45.7, 128.5, 254.9, 255.0]] * 4, np.float32)
    src, csv = _one_image(tmp_path, Image.fromarray(values, "F"))
    got = _pack(src, csv, tmp_path / "p")[0]["image"][..., 0]
    np.testing.assert_array_equal(got, np.round(values).astype(np.uint8))


def test_float_image_of_whole_numbers_0_and_1_is_kept(tmp_path):
    values = np.tile(np.array([0.0, 1.0], np.float32), (4, 3))  # a 0/1 mask saved as float
    src, csv = _one_image(tmp_path, Image.fromarray(values, "F"))
    got = _pack(src, csv, tmp_path / "p")[0]["image"][..., 0]
    np.testing.assert_array_equal(got, values.astype(np.uint8))


# ----- indices that are not whole numbers -------------------------------------------------
def _small_pack(tmp_path: Path, n: int = 4) -> PackedDataset:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(n):
        Image.fromarray(np.full((4, 6), 10 * i, np.uint8)).save(src / f"{i}.png")
    (src / "list.csv").write_text("image,label\n" + "".join(f"{i}.png,{i}\n" for i in range(n)))
    return _pack(src, src / "list.csv", tmp_path / "p")


@pytest.mark.parametrize("index", [2.7, "3"])
def test_read_column_refuses_an_index_that_is_not_an_integer(tmp_path, index):
    ds = _small_pack(tmp_path)
    with pytest.raises(TypeError, match="index"):
        ds.read_column("label", index)


@pytest.mark.parametrize("indices", [[2.7, 1.0], ["3"], [True, False, True, False]])
def test_a_batch_of_indices_that_are_not_integers_is_refused(tmp_path, indices):
    ds = _small_pack(tmp_path)
    with pytest.raises(TypeError, match="ind"):
        ds[indices]


# ----- multi-label columns ----------------------------------------------------------------
def test_vstr_dtype_is_refused_rather_than_read_as_one_text(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    Image.fromarray(np.zeros((4, 6), np.uint8)).save(src / "a.png")
    (src / "list.csv").write_text('image,tags\na.png,"cat,dog"\n')
    with pytest.raises(ValueError, match=r"'vstr'.*one text per row.*'vint64'"):
        pack(src, src / "list.csv", tmp_path / "p", dtype="vstr", height=4, width=6,
             workers=0, progress=False)  # fmt: skip
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("cell", ['"[1, 2, 3]"', '"[1 2 3]"', '"(1, 2)"'])
def test_a_list_cell_written_with_brackets_says_to_drop_them(tmp_path, cell):
    src = tmp_path / "src"
    src.mkdir()
    Image.fromarray(np.zeros((4, 6), np.uint8)).save(src / "a.png")
    (src / "list.csv").write_text(f"image,tokens\na.png,{cell}\n")
    with pytest.raises(PackError, match=r"brackets.*without them.*'1,2,3'.*line 2"):
        pack(src, src / "list.csv", tmp_path / "p", dtype="vint64", height=4, width=6,
             workers=0, progress=False)  # fmt: skip


# ----- how the list is read ---------------------------------------------------------------
def _list(tmp_path: Path, text: bytes, n: int = 3) -> tuple[Path, Path]:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(n):
        Image.fromarray(np.full((4, 6), 10 * i, np.uint8)).save(src / f"{i}.png")
    (src / "list.csv").write_bytes(text)
    return src, src / "list.csv"


def test_list_with_carriage_return_line_ends_is_read(tmp_path):
    src, csv = _list(tmp_path, b'image,label,caption\r0.png,0,a\r1.png,1,"b\rc"\r2.png,2,d\r')
    ds = _pack(src, csv, tmp_path / "p", dtype=["int64", "str"])
    assert [ds[i]["label"] for i in range(3)] == [0, 1, 2]
    assert [ds[i]["caption"] for i in range(3)] == ["a", "b\rc", "d"]


def test_a_quote_that_is_never_closed_is_an_error_not_lost_rows(tmp_path):
    src, csv = _list(tmp_path, b'image,caption\n0.png,ok\n1.png,"oops\n2.png,fine\n')
    with pytest.raises(ValueError, match=r"opened on line 3 is never closed.*two quotes"):
        _pack(src, csv, tmp_path / "p", dtype=["str"])
    assert not (tmp_path / "p").exists()


def test_a_cell_that_goes_on_after_its_closing_quote_is_an_error(tmp_path):
    src, csv = _list(tmp_path, b'image\tcaption\n0.png\t"Hello," she said\n')
    with pytest.raises(ValueError, match=r"on line 2 goes on after its closing quote"):
        _pack(src, csv, tmp_path / "p", dtype=["str"])


def test_cli_says_why_a_list_with_an_open_quote_cannot_be_read(tmp_path, capsys):
    from scramjet.cli import main

    src, csv = _list(tmp_path, b'image,caption\n0.png,"oops\n1.png,fine\n')
    argv = ["pack", str(src), str(csv), str(tmp_path / "p"), "--dtype", "str",
            "--height", "4", "--width", "6", "--workers", "0", "--no-progress"]  # fmt: skip
    assert main(argv) == 1
    assert "never closed" in capsys.readouterr().err


def test_file_list_that_is_a_directory_says_so(tmp_path):
    src, _ = _list(tmp_path, b"image,label\n0.png,0\n")
    with pytest.raises(IsADirectoryError, match=r"is a directory, not a CSV list.*list\.csv"):
        _pack(src, src, tmp_path / "p")


def test_sample_given_one_image_names_its_shape():
    from scramjet.data.augment import Sample

    with pytest.raises(ValueError, match=r"received one image of shape \(4, 5, 3\) \(HWC\)"):
        Sample(2, seed=0)(np.zeros((4, 5, 3), np.uint8), index=0)


def test_missing_file_names_the_same_name_in_another_unicode_form(tmp_path):
    import unicodedata

    src = tmp_path / "src"
    src.mkdir()
    Image.fromarray(np.zeros((4, 6), np.uint8)).save(src / unicodedata.normalize("NFD", "café.png"))
    (src / "list.csv").write_text("image,label\ncafé.png,1\n", encoding="utf-8")  # NFC
    with pytest.raises(PackError, match=r"file not found.*written as NFD exists.*normalize"):
        _pack(src, src / "list.csv", tmp_path / "p")


def test_a_float_written_with_a_decimal_comma_says_so(tmp_path):
    src, csv = _list(tmp_path, b'image,score\n0.png,"1,5"\n')
    with pytest.raises(PackError, match=r"decimal comma\? write 1\.5"):
        _pack(src, csv, tmp_path / "p", dtype=["float32"])
