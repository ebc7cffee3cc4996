"""`scramjet pack` on the command line, and nebulae's Fuel names."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from packdata_helpers import write_csv, write_images

from scramjet.cli import main
from scramjet.compat.nebulae import Comburant, FuelGenerator, Tank
from scramjet.compat.nebulae import fuel as depot  # nebulae: from nebulae.fuel import depot
from scramjet.compat.nebulae.fuel import Brighten, Crop, Flip, Noise, Sample
from scramjet.data import PackedDataset


def test_cli_pack_in_process(folder, tmp_path, capsys):
    root, _ = folder
    code = main(
        [
            "pack",
            str(root),
            str(root / "list.csv"),
            str(tmp_path / "p"),
            "--dtype",
            "int64",
            "--height",
            "16",
            "--width",
            "20",
            "--encode",
            "png",
            "--shards",
            "3",
            "--workers",
            "0",
            "--no-progress",
        ]
    )
    assert code == 0
    assert "packed 12 samples into 3 shards" in capsys.readouterr().out
    ds = PackedDataset(tmp_path / "p", verify=True)
    assert ds[0]["image"].shape == (16, 20, 3)
    code = main(
        [
            "pack",
            str(root),
            str(root / "list.csv"),
            str(tmp_path / "p"),
            "--dtype",
            "int64",
            "--height",
            "16",
            "--width",
            "20",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "already exists" in err
    assert "--overwrite" in err and "overwrite=True" not in err  # the flag, as typed here


def test_cli_subprocess_reports_bad_rows(folder, tmp_path):
    root, _ = folder
    with open(root / "list.csv", "a") as fh:
        fh.write("../escape.png\t1\n")
    cmd = [
        sys.executable,
        "-m",
        "scramjet.cli",
        "pack",
        str(root),
        str(root / "list.csv"),
        str(tmp_path / "p"),
        "--dtype",
        "int64",
        "--height",
        "8",
        "--width",
        "8",
        "--encode",
        "raw",
        "--workers",
        "2",
    ]
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "escapes file_dir" in bad.stderr and "line 14" in bad.stderr
    ok = subprocess.run([*cmd, "--on-error", "skip"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "skipped CSV line 14" in ok.stderr and "1 rows skipped" in ok.stdout


# ----- the brochure's Fuel examples, with only the imports changed ----------------------
def fetcher(data, idx):
    ret = {}
    ret["image"] = data["image"][idx]
    ret["label"] = data["label"][idx].astype("int64")
    return ret


def prep(data):
    # convert to channel-first format
    data["image"] = np.transpose(data["image"], (2, 0, 1)).astype("float32")
    return data


def test_fuel_generator_and_tank_brochure_example(folder, tmp_path):
    root, _ = folder
    fg = FuelGenerator(
        file_dir=str(root), file_list=str(root / "list.csv"), dtype=["int64"], is_seq=False
    )
    fg.generate(
        str(tmp_path / "train.hdf5"),
        height=32,
        width=40,
        channel=3,
        encode="JPEG",
        shards=2,
        keep_exif=True,
        progress=False,
        workers=0,
    )
    fg.modify(height=20, width=20)
    fg.generate(str(tmp_path / "small.hdf5"), progress=False, workers=0)
    fg.modify(config={"height": 12, "width": 12, "shards": 3})
    fg.generate(str(tmp_path / "small.hdf5"), progress=False, workers=0)  # replaces it
    shards = sorted(p.name for p in tmp_path.glob("small_*.hdf5"))
    assert shards == ["small_0.hdf5", "small_1.hdf5", "small_2.hdf5"]  # nebulae's file names

    tank = depot.Tank(
        str(tmp_path / "train.hdf5"),
        {"image": "uint8", "label": "int64"},
        batch_size=5,
        shuffle=True,
        in_same_size=True,
        fetch_fn=fetcher,
        prep_fn=prep,
    )
    assert len(tank) == 12 and tank.MPE == 2
    seen = []
    for _ in range(tank.MPE):
        batch = tank.next()
        assert batch["image"].shape == (5, 3, 32, 40) and batch["image"].dtype == torch.float32
        assert batch["label"].dtype == torch.int64
        seen.extend(batch["label"].tolist())
    assert len(seen) == 10
    assert tank.next()["label"].shape == (5,) and tank.epoch == 1  # wraps into epoch 2

    cfg = {
        "file_dir": str(root),
        "file_list": str(root / "list.csv"),
        "dtype": ["int64"],
        "height": 8,
        "width": 8,
    }
    FuelGenerator(config=cfg).generate(str(tmp_path / "cfg.hdf5"), progress=False, workers=0)
    with pytest.raises(ValueError, match="either config"):
        FuelGenerator(file_dir=str(root), config=cfg)
    with pytest.raises(ValueError, match="unknown FuelGenerator properties"):
        fg.modify(hieght=3)


def test_tank_default_fetch_no_shuffle_and_partial_batches(folder, tmp_path):
    root, _ = folder
    FuelGenerator(str(root), str(root / "list.csv"), ["int64"], False).generate(
        str(tmp_path / "d"), 8, 8, encode="png", progress=False, workers=0
    )
    tank = Tank(
        str(tmp_path / "d"),
        {"image": "uint8", "label": "int32"},
        batch_size=5,
        shuffle=False,
        in_same_size=False,
    )
    assert tank.MPE == 3
    batches = [tank.next() for _ in range(3)]
    assert [len(b["label"]) for b in batches] == [5, 5, 2]
    assert batches[0]["label"].dtype == torch.int32
    assert batches[0]["label"].tolist() == [0, 1, 2, 3, 0]


def test_tank_distributed_sampler_changes_order_each_epoch(folder, tmp_path, monkeypatch):
    root, _ = folder
    FuelGenerator(str(root), str(root / "list.csv"), ["int64"]).generate(
        str(tmp_path / "d"), 8, 8, progress=False, workers=0
    )
    img_sums = {}
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        tank = Tank(str(tmp_path / "d"), {"image": "uint8", "label": "int64"}, batch_size=3)
        assert tank.MPE == 2 and len(tank) == 12
        epochs = []
        for _ in range(3):
            epochs.append([int(x.sum()) for _ in range(tank.MPE) for x in tank.next()["image"]])
        assert epochs[0] != epochs[1] or epochs[1] != epochs[2]
        img_sums[rank] = set(epochs[0])
    assert not img_sums[0] & img_sums[1]  # ranks read disjoint samples in one epoch


def test_comburant_with_sequences(tmp_path):
    frames = write_images(tmp_path / "v", 6, size=(16, 16))
    write_csv(
        tmp_path / "l.csv", ["image", "label"], [[",".join(n for n, _ in frames), "1"]], sep="\t"
    )
    fg = FuelGenerator(str(tmp_path / "v"), str(tmp_path / "l.csv"), ["int64"], is_seq=True)
    fg.generate(str(tmp_path / "seq"), 16, 16, progress=False, workers=0)
    comburant = Comburant(Sample(2), Flip(), Crop(area=(0.5, 1.0)), Brighten(0.2), seed=3)

    def prep_seq(data):
        data["image"] = comburant(data["image"])
        return data

    tank = Tank(
        str(tmp_path / "seq"), {"image": "uint8", "label": "int64"}, batch_size=1, prep_fn=prep_seq
    )
    assert tank.next()["image"].shape == (1, 3, 16, 16, 3)


# ----- a seeded Comburant in prep_fn draws per sample, in every worker alike -------------
COMBURANT = Comburant(Flip(), Brighten(0.5), Noise(0.05), seed=3)


def prep_comburant(data):
    # nebulae style: the Comburant is called inside prep_fn, with no index to pass
    data["image"] = COMBURANT(data["image"])
    return data


def image_only(data, idx):
    return data["image"][idx]


def test_seeded_comburant_in_tank_draws_per_sample_like_packed_dataset(tmp_path):
    imgs = write_images(tmp_path / "one", 1, size=(12, 10))
    write_csv(tmp_path / "l.csv", ["image", "label"], [[imgs[0][0], str(i)] for i in range(8)])
    FuelGenerator(str(tmp_path / "one"), str(tmp_path / "l.csv"), ["int64"]).generate(
        str(tmp_path / "same"), 12, 10, encode="png", progress=False, workers=0
    )  # eight samples with the same pixels: only the augmentation tells them apart
    spec = {"image": "uint8", "label": "int64"}
    epochs = {}
    for workers in (0, 2):
        tank = Tank(
            str(tmp_path / "same"),
            spec,
            batch_size=2,
            shuffle=False,
            prep_fn=prep_comburant,
            num_workers=workers,
        )
        epochs[workers] = [
            torch.cat([tank.next()["image"] for _ in range(tank.MPE)]) for _ in range(2)
        ]
    for e in range(2):  # the same draws with and without workers
        assert torch.equal(epochs[0][e], epochs[2][e])
    assert len({x.numpy().tobytes() for x in epochs[2][0]}) == 8  # one draw per sample
    assert not torch.equal(epochs[0][0], epochs[0][1])  # new draws every epoch
    packed = PackedDataset(tmp_path / "same", transform={"image": COMBURANT})
    for e in range(2):  # exactly what PackedDataset(transform=...) gives
        packed.set_epoch(e)
        for i in range(8):
            np.testing.assert_array_equal(epochs[0][e][i].numpy(), packed[i]["image"])
    direct = Tank(
        str(tmp_path / "same"),
        spec,
        batch_size=4,
        shuffle=False,
        fetch_fn=image_only,
        prep_fn=COMBURANT,  # the Comburant itself as prep_fn gets the index too
        num_workers=2,
    )
    assert torch.equal(torch.cat([direct.next() for _ in range(direct.MPE)]), epochs[0][0])
