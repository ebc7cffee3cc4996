"""nebulae's Fuel: the brochure's import paths and Tank example, hdf5/npz files, v-dtypes."""

from __future__ import annotations

import importlib
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from PIL import Image

import scramjet.compat.nebulae as neb
from scramjet.compat.nebulae.fuel import FuelGenerator, depot, farm
from scramjet.data import PackedDataset
from scramjet.data.writer import PackError

LABELS = [2, 0, 5, 1, 3, 4]


def make_raw(root: Path, n: int = 6) -> Path:
    """``root/raw``: n PNGs (pixel value 40 * i) and list.csv with a label and two lists."""
    raw = root / "raw"
    raw.mkdir(parents=True)
    rows = []
    for i in range(n):
        Image.fromarray(np.full((12, 10, 3), 40 * i, np.uint8)).save(raw / f"img_{i}.png")
        tags = ",".join(str(10 * i + j) for j in range(i))  # i values, the first row none
        raw_bytes = ",".join(str(j) for j in range(i % 3 + 1))
        rows.append(f'img_{i}.png\t{LABELS[i]}\t"{tags}"\t"{raw_bytes}"\n')
    (raw / "list.csv").write_text("image\tlabel\ttags\tbytes\n" + "".join(rows))
    return raw


def generator(raw: Path) -> FuelGenerator:
    return FuelGenerator(str(raw), "list.csv", ["int64", "vint64", "vuint8"], False)


# ----- the brochure's Tank example, with only the imports changed ------------------------
def fetcher(data, idx):
    ret = {}
    ret["image"] = data["image"][idx]
    ret["label"] = data["label"][idx].astype("int64")
    return ret


def prep(data):
    # convert to channel-first format
    data["image"] = np.transpose(data["image"], (2, 0, 1)).astype("float32")
    return data


@pytest.mark.parametrize("module_name", ["depot", "farm"])
def test_from_nebulae_fuel_import_depot_and_farm(module_name: str) -> None:
    # `from nebulae.fuel import depot` / `farm` with the prefix replaced
    module = importlib.import_module(f"scramjet.compat.nebulae.fuel.{module_name}")
    assert module is {"depot": depot, "farm": farm}[module_name]
    for name in ("Tank", "Comburant", "Flip", "Crop", "Rotate", "Brighten", "Contrast"):
        assert getattr(module, name) is getattr(neb, name)
    fuel = importlib.import_module("scramjet.compat.nebulae.fuel")
    for name in ("FuelGenerator", "Tank", "Comburant", "Sample", "Saturate", "Hue", "Noise"):
        assert getattr(fuel, name) is getattr(neb.fuel, name)


def test_the_brochures_other_module_paths_import() -> None:
    from scramjet.compat.nebulae.astro import dock
    from scramjet.compat.nebulae.cockpit import GPU, Engine, TimeMachine

    assert importlib.import_module("scramjet.compat.nebulae.astro.dock") is dock
    assert dock.Craft is neb.Craft and neb.dock is dock
    assert GPU == "GPU" and Engine is neb.Engine and TimeMachine is neb.TimeMachine
    assert neb.cockpit.Multiverse is neb.Multiverse
    assert importlib.import_module("scramjet.compat.nebulae.aerolog").DashBoard is neb.DashBoard
    assert importlib.import_module("scramjet.compat.nebulae.kit").GPUtil is neb.GPUtil


@pytest.mark.parametrize("suffix", [".hdf5", ".npz"])
def test_brochure_tank_example_reads_the_generated_file(tmp_path: Path, suffix: str) -> None:
    raw = make_raw(tmp_path)
    generator(raw).generate(str(tmp_path / f"train{suffix}"), 8, 6, encode="png", progress=False)
    tank = depot.Tank(
        str(tmp_path / f"train{suffix}"),
        {"image": "vuint8", "label": "int64"},
        batch_size=4,
        shuffle=False,
        in_same_size=True,
        fetch_fn=fetcher,
        prep_fn=prep,
    )
    assert len(tank) == 6 and tank.MPE == 1
    batch = tank.next()
    assert batch["image"].shape == (4, 3, 8, 6) and batch["image"].dtype == torch.float32
    assert batch["label"].tolist() == LABELS[:4]
    # PNG is lossless: every pixel of sample i is 40 * i
    assert [float(img.mean()) for img in batch["image"]] == [0.0, 40.0, 80.0, 120.0]


# ----- item: dst_path "a hdf5/npz file" ----------------------------------------------------
@pytest.mark.parametrize("suffix", [".hdf5", ".h5"])
def test_generate_writes_a_real_hdf5_file(tmp_path: Path, suffix: str) -> None:
    raw = make_raw(tmp_path)
    dst = tmp_path / f"train{suffix}"
    report = generator(raw).generate(str(dst), 8, 6, encode="png", progress=False)
    assert dst.is_file() and h5py.is_hdf5(dst)
    assert report.path == dst and report.num_samples == 6
    with h5py.File(dst, "r") as h5:  # one dataset per CSV column at the root
        assert {"image", "label", "tags", "bytes"} <= set(h5)
        assert h5["label"][()].tolist() == LABELS
        offsets = h5["_offsets/tags"][()]
        assert h5["tags"][offsets[3] : offsets[4]].tolist() == [30, 31, 32]
    # nothing else was left next to it (no partial or hidden folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw", dst.name]


def test_generate_writes_a_real_npz_file(tmp_path: Path) -> None:
    raw = make_raw(tmp_path)
    dst = tmp_path / "train.npz"
    generator(raw).generate(str(dst), 8, 6, encode="raw", progress=False)
    with np.load(dst, allow_pickle=False) as npz:
        assert npz["label"].tolist() == LABELS
        assert npz["image"].shape == (6, 8, 6, 3)
        assert npz["image"][2].mean() == 80
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw", "train.npz"]
    tank = depot.Tank(str(dst), {"image": "uint8", "label": "int64"}, 3, shuffle=False)
    assert tank.next()["label"].tolist() == LABELS[:3]


def test_generate_with_shards_writes_nebulae_named_files(tmp_path: Path) -> None:
    raw = make_raw(tmp_path)
    fg = generator(raw)
    fg.generate(str(tmp_path / "train.hdf5"), 8, 6, progress=False)  # one file first
    fg.generate(str(tmp_path / "train.hdf5"), 8, 6, shards=3, progress=False)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != "raw")
    assert names == ["train_0.hdf5", "train_1.hdf5", "train_2.hdf5"]  # the old one is gone
    for k in range(3):
        with h5py.File(tmp_path / f"train_{k}.hdf5", "r") as h5:
            assert h5["label"][()].tolist() == LABELS[2 * k : 2 * k + 2]
    tank = depot.Tank(str(tmp_path / "train.hdf5"), {"label": "int64"}, 6, shuffle=False)
    assert len(tank) == 6 and tank.next()["label"].tolist() == LABELS


def test_other_paths_still_get_a_pack_directory(tmp_path: Path) -> None:
    raw = make_raw(tmp_path)
    generator(raw).generate(str(tmp_path / "train"), 8, 6, shards=2, progress=False)
    assert (tmp_path / "train" / "manifest.json").is_file()
    assert len(PackedDataset(tmp_path / "train").manifest.shards) == 2


def test_a_failed_generate_leaves_the_old_file(tmp_path: Path) -> None:
    raw = make_raw(tmp_path)
    fg = generator(raw)
    dst = tmp_path / "train.hdf5"
    fg.generate(str(dst), 8, 6, progress=False)
    before = dst.read_bytes()
    (raw / "img_3.png").unlink()
    with pytest.raises(PackError, match=r"img_3\.png"):
        fg.generate(str(dst), 8, 6, progress=False)
    assert dst.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw", "train.hdf5"]


def test_tank_refuses_an_hdf5_file_scramjet_did_not_write(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "foreign.hdf5", "w") as h5:
        h5["label"] = np.arange(3)
    with pytest.raises(ValueError, match=r"not written by FuelGenerator\.generate"):
        depot.Tank(str(tmp_path / "foreign.hdf5"), {"label": "int64"}, 1)
    with pytest.raises(FileNotFoundError, match=r"missing\.hdf5"):
        depot.Tank(str(tmp_path / "missing.hdf5"), {"label": "int64"}, 1)


# ----- item: 'v'-prefixed dtypes in data_specf ---------------------------------------------
def test_v_dtypes_in_data_specf_without_fetch_fn(tmp_path: Path) -> None:
    raw = make_raw(tmp_path)
    generator(raw).generate(str(tmp_path / "train.hdf5"), 8, 6, progress=False)
    tank = depot.Tank(
        str(tmp_path / "train.hdf5"),
        {"image": "uint8", "label": "int64", "tags": "vint64", "bytes": "vuint8"},
        batch_size=3,
        shuffle=False,
    )
    batch = tank.next()
    assert batch["image"].shape == (3, 8, 6, 3) and batch["label"].tolist() == LABELS[:3]
    assert [t.tolist() for t in batch["tags"]] == [[], [10], [20, 21]]  # one length per row
    assert [t.dtype for t in batch["tags"]] == [torch.int64] * 3
    assert [t.tolist() for t in batch["bytes"]] == [[0], [0, 1], [0, 1, 2]]
    assert all(t.dtype == torch.uint8 for t in batch["bytes"])
    with pytest.raises(ValueError, match=r"data_specf\['label'\] = 'vint65'"):
        depot.Tank(str(tmp_path / "train.hdf5"), {"label": "vint65"}, 1)


# ----- item: file_list is relative to file_dir ---------------------------------------------
def test_file_list_is_resolved_against_file_dir(tmp_path: Path, monkeypatch) -> None:
    raw = make_raw(tmp_path / "data")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # list.csv is not in the current directory
    report = FuelGenerator(str(raw), "list.csv", ["int64", "vint64", "vuint8"]).generate(
        "out.hdf5", 8, 6, progress=False
    )
    assert report.num_samples == 6
    with h5py.File("out.hdf5", "r") as h5:
        assert h5["label"][()].tolist() == LABELS


def test_a_missing_file_list_names_both_paths(tmp_path: Path, monkeypatch) -> None:
    raw = make_raw(tmp_path)
    monkeypatch.chdir(tmp_path)
    fg = FuelGenerator("raw", "raw/list.csv", ["int64", "vint64", "vuint8"])  # cwd-relative
    with pytest.raises(FileNotFoundError) as info:
        fg.generate("out.hdf5", 8, 6, progress=False)
    message = str(info.value)
    assert "'raw/list.csv'" in message and "file_dir 'raw'" in message
    assert "'raw/raw/list.csv'" in message  # where it looked
    assert "relative to the current directory" in message  # and how to fix it
    assert not Path("out.hdf5").exists()
    assert raw.is_dir()


def test_a_batch_larger_than_the_data_is_explained(tmp_path: Path) -> None:
    # 6 samples, batch_size=8, in_same_size=True (the default): no full batch exists.
    dst = tmp_path / "train.hdf5"
    generator(make_raw(tmp_path)).generate(str(dst), 8, 8, encode="PNG", progress=False)
    tank = depot.Tank(str(dst), {"image": "uint8", "label": "int64"}, batch_size=8)
    assert (len(tank), tank.MPE) == (6, 0)
    with pytest.raises(ValueError) as info:
        tank.next()
    message = str(info.value)
    assert "batch_size=8" in message and "6 samples" in message and "in_same_size=False" in message
    loose = depot.Tank(str(dst), {"image": "uint8", "label": "int64"}, 8, in_same_size=False)
    assert len(loose.next()["label"]) == 6


def test_a_yes_no_setting_given_as_text_is_refused_not_read_as_true(tmp_path: Path) -> None:
    raw = make_raw(tmp_path)
    fuel = FuelGenerator(str(raw), "list.csv", ["int64", "vint64", "vuint8"], "False")
    with pytest.raises(TypeError, match="is_seq"):
        fuel.generate(str(tmp_path / "out.pack"), 8, 6, encode="png", progress=False)
    ok = FuelGenerator(str(raw), "list.csv", ["int64", "vint64", "vuint8"], 0)  # 0/1 read as bools
    assert ok.generate(str(tmp_path / "ok.pack"), 8, 6, progress=False).num_samples == 6
