"""A nebulae user's script with its imports changed: the calls the brochure shows, as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from scramjet.compat.nebulae.fuel import FuelGenerator, depot


def _generate(root: Path, n: int = 10, name: str = "train.hdf5") -> Path:
    """``n`` 6x6 PNG images whose pixels hold their index, labels ``i % 3`` and ids ``i``."""
    raw = root / "raw"
    raw.mkdir(exist_ok=True)
    for i in range(n):
        Image.fromarray(np.full((6, 6, 3), i, np.uint8)).save(raw / f"{i}.png")
    rows = "".join(f"{i}.png\t{i % 3}\t{i}\n" for i in range(n))
    (raw / "list.csv").write_text("image\tlabel\tid\n" + rows)
    fg = FuelGenerator(str(raw), "list.csv", ["int64", "int64"], False)
    fg.generate(root / name, 6, 6, encode="PNG", progress=False, workers=0)
    return root / name


def test_fetch_fn_reads_slices_and_index_lists_of_a_column_as_h5py_does(tmp_path: Path) -> None:
    data = _generate(tmp_path)
    seen: dict[str, object] = {}

    def fetcher(d: object, idx: int) -> dict[str, object]:
        col = d["id"]  # type: ignore[index]
        seen.update(window=col[idx : idx + 3], picked=col[[1, 4, -1]], images=d["image"][0:2])  # type: ignore[index]
        return {"id": col[idx]}

    tank = depot.Tank(data, {"image": "uint8", "id": "int64"}, 1, False, False, fetcher)
    tank.next()
    assert np.asarray(seen["window"]).tolist() == [0, 1, 2]
    assert np.asarray(seen["picked"]).tolist() == [1, 4, 9]
    assert np.asarray(seen["images"]).shape == (2, 6, 6, 3)


def test_fetch_fn_with_a_float_index_is_refused_not_truncated(tmp_path: Path) -> None:
    data = _generate(tmp_path)

    def fetcher(d: object, idx: int) -> dict[str, object]:
        return {"label": d["label"][2.7]}  # type: ignore[index]

    tank = depot.Tank(data, {"label": "int64"}, 1, False, False, fetcher)
    with pytest.raises(TypeError, match=r"received float 2\.7.*int\(i\)"):
        tank.next()


def test_depot_and_farm_hold_normalize_which_the_readme_lists_among_the_augmentations(
    tmp_path: Path,
) -> None:
    from scramjet.compat.nebulae.fuel import farm

    data = _generate(tmp_path)
    comb = depot.Comburant(depot.Flip(), farm.Normalize([0.5] * 3, [0.25] * 3), seed=0)
    tank = depot.Tank(data, {"image": "uint8", "id": "int64"}, 2, False, False, prep_fn=comb)
    batch = tank.next()
    assert batch["image"].dtype == torch.float32
    assert batch["image"][:, 0, 0, 0].tolist() == pytest.approx([-2.0, (1 / 255 - 0.5) / 0.25])


def _sideways_photo(raw: Path) -> None:
    """A JPEG whose left half is white, tagged EXIF Orientation 6 (shown turned 90°)."""
    pixels = np.zeros((8, 8, 3), np.uint8)
    pixels[:, 4:] = 255
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(pixels[:, ::-1].copy()).save(raw / "a.jpg", exif=exif, quality=100)
    (raw / "list.csv").write_text("image\tlabel\na.jpg\t0\n")


@pytest.mark.parametrize("how", ["modify", "config"])
def test_exif_orientation_is_a_generator_property_as_the_readme_says(
    tmp_path: Path, how: str
) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    _sideways_photo(raw)
    source = {"file_dir": str(raw), "file_list": "list.csv", "dtype": ["int64"]}
    if how == "config":
        fg = FuelGenerator(config={**source, "exif_orientation": False})
    else:
        fg = FuelGenerator(**source)
        fg.modify(exif_orientation=False)
    fg.generate(tmp_path / "a.hdf5", 8, 8, encode="PNG", progress=False, workers=0)
    image = depot.Tank(tmp_path / "a.hdf5", {"image": "uint8"}, 1).next()["image"][0]
    # stored as the file holds it: white on the left, not turned upright (white on top)
    assert image[:, :3].float().mean() > 200 and image[:, 5:].float().mean() < 50


def test_the_missing_header_advice_for_a_tab_separated_list_can_be_followed(
    tmp_path: Path,
) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(2):
        Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(raw / f"{i}.png")
    rows = "0.png\t0\n1.png\t1\n"  # the brochure's tab-separated list, its header forgotten
    (raw / "list.csv").write_text(rows)
    fg = FuelGenerator(str(raw), "list.csv", ["int64"], False)
    with pytest.raises(ValueError, match="header") as caught:
        fg.generate(tmp_path / "a.hdf5", 4, 4, progress=False, workers=0)
    suggested = str(caught.value).split("e.g. ")[-1].strip(" .'\"")
    (raw / "list.csv").write_text(suggested.replace("\\t", "\t") + "\n" + rows)
    fg.generate(tmp_path / "a.hdf5", 4, 4, progress=False, workers=0)  # following the advice
    assert len(depot.Tank(tmp_path / "a.hdf5", {"label": "int64"}, 1)) == 2


def test_a_comburant_as_prep_fn_on_tuple_items_says_what_to_return_instead(
    tmp_path: Path,
) -> None:
    data = _generate(tmp_path)
    comb = depot.Comburant(depot.Flip(), seed=0)

    def fetcher(d: Any, idx: int) -> tuple[Any, Any]:
        return d["image"][idx], d["label"][idx]

    tank = depot.Tank(data, {"image": "uint8", "label": "int64"}, 2, prep_fn=comb, fetch_fn=fetcher)
    with pytest.raises(TypeError, match=r"fetch_fn returned a tuple.*Return a dict from fetch_fn"):
        tank.next()


def _values(root: Path, values: list[str], dtype: str) -> Path:
    raw = root / "raw"
    raw.mkdir()
    for i in range(len(values)):
        Image.fromarray(np.full((4, 4, 3), i, np.uint8)).save(raw / f"{i}.png")
    rows = "".join(f"{i}.png\t{v}\n" for i, v in enumerate(values))
    (raw / "list.csv").write_text("image\tvalue\n" + rows)
    FuelGenerator(str(raw), "list.csv", [dtype]).generate(
        root / "v.hdf5", 4, 4, progress=False, workers=0
    )
    return root / "v.hdf5"


def test_data_specf_reads_values_that_fit_its_dtype(tmp_path: Path) -> None:
    data = _values(tmp_path, ["3", "200"], "int64")
    batch = depot.Tank(data, {"value": "uint8"}, 2, False).next()
    assert batch["value"].dtype == torch.uint8 and batch["value"].tolist() == [3, 200]


@pytest.mark.parametrize(
    ("values", "packed", "declared", "shown"),
    [
        (["1", "70000"], "int64", "int16", "70000 the pack stores for it as int64"),
        (["2.5", "1"], "float32", "int64", "2.5 the pack stores for it as float32"),
    ],
)
def test_data_specf_refuses_a_dtype_that_would_wrap_or_truncate_values(
    tmp_path: Path, values: list[str], packed: str, declared: str, shown: str
) -> None:
    data = _values(tmp_path, values, packed)
    tank = depot.Tank(data, {"value": declared}, 2, False)
    with pytest.raises(ValueError, match=f"{shown}.*data_specf\\['value'\\] = '{packed}'"):
        tank.next()  # 70000 read as 4464 and 2.5 as 2 before
