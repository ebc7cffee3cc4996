"""`scramjet.data` behaviours users rely on, beyond the format and loader tests.

Each test names a behaviour a user relies on: augmentations that change every epoch in
persistent worker processes, errors that name what is wrong with a pack path, skipped rows
reported in CSV order, EXIF orientation, and the forms ``dtype`` takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pack_trainer_helpers import CrashAt, PackTrainer, Seen
from packdata_helpers import write_csv, write_images
from torch import nn
from torch.utils.data import DataLoader

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.data import PackedDataset, PackFormatError, pack
from scramjet.data import augment as A


@pytest.fixture
def pack_path(tmp_path: Path) -> Path:
    """12 raw 16x16 images in 3 shards; ``idx`` is the row."""
    imgs = write_images(tmp_path / "imgs", 12, size=(16, 16))
    rows = [[name, str(i % 4), str(i)] for i, (name, _) in enumerate(imgs)]
    write_csv(tmp_path / "imgs" / "list.csv", ["image", "label", "idx"], rows)
    pack(
        tmp_path / "imgs", tmp_path / "imgs" / "list.csv", tmp_path / "p.pack",
        dtype=["int64", "int64"], height=16, width=16, encode="raw", shards=3, workers=0,
        progress=False,
    )  # fmt: skip
    return tmp_path / "p.pack"


def augmented(path: Path) -> PackedDataset:
    ops = A.Compose(A.Flip(horizontal=True, vertical=True), A.Brighten(0.4), seed=3)
    return PackedDataset(path, transform={"image": ops})


def expected(path: Path, epoch: int, indices: list[int]) -> torch.Tensor:
    reference = augmented(path)
    reference.set_epoch(epoch)
    return torch.stack([torch.as_tensor(reference[i]["image"]) for i in indices])


# -- 1. persistent workers draw each epoch's augmentations ------------------------------


@pytest.mark.parametrize(
    "kind",
    ["pack-loader", "dataloader", pytest.param("spawn-dataloader", marks=pytest.mark.slow)],
)
def test_persistent_workers_draw_the_augmentations_of_the_epoch_set_in_the_main_process(
    pack_path: Path, kind: str
) -> None:
    ds = augmented(pack_path)
    if kind == "pack-loader":
        loader: Any = ds.loader(4, num_workers=2, persistent_workers=True, backend="processes")
    else:
        context = "spawn" if kind == "spawn-dataloader" else None
        loader = DataLoader(
            ds, batch_size=4, num_workers=2, persistent_workers=True,
            multiprocessing_context=context,
        )  # fmt: skip
    for epoch in (0, 1, 2):
        ds.set_epoch(epoch)
        batches = list(loader)
        got = torch.cat([b["image"] for b in batches])
        idx = torch.cat([b["idx"] for b in batches]).tolist()
        assert torch.equal(got, expected(pack_path, epoch, idx)), epoch


def test_a_copy_of_a_dataset_keeps_its_own_epoch(pack_path: Path) -> None:
    import copy
    import pickle

    ds = augmented(pack_path)
    ds.set_epoch(2)
    deep, pickled, shallow = copy.deepcopy(ds), pickle.loads(pickle.dumps(ds)), copy.copy(ds)
    assert (deep.epoch, pickled.epoch, shallow.epoch) == (2, 2, 2)
    ds.set_epoch(5)
    assert (deep.epoch, pickled.epoch, shallow.epoch) == (2, 2, 2)
    pickled.set_epoch(7)  # an unpickled dataset still reaches its own persistent workers
    loader = DataLoader(pickled, batch_size=6, num_workers=1, persistent_workers=True)
    list(loader)
    pickled.set_epoch(8)
    batch = next(iter(loader))
    assert torch.equal(batch["image"], expected(pack_path, 8, list(range(6))))


def train(data: Any, callbacks: list[Any], resume_from: Path | None = None, **kw: Any) -> Trainer:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = nn.Linear(16 * 16 * 3, 4)
    trainer = PackTrainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.05),
        callbacks=callbacks, seed=0,
    )  # fmt: skip
    trainer.train(data, num_epochs=3, resume_from=resume_from, **kw)
    return trainer


@pytest.mark.parametrize("given", ["dataset", "pack-loader"])
def test_the_trainer_with_persistent_workers_draws_every_epochs_augmentations_and_resumes(
    pack_path: Path, tmp_path: Path, given: str
) -> None:
    def data() -> tuple[Any, dict[str, Any]]:
        ds = augmented(pack_path)
        if given == "dataset":
            kwargs = {"num_workers": 2, "persistent_workers": True}
            return ds, {"per_device_batch_size": 4, "train_dataloader_kwargs": kwargs}
        generator = torch.Generator().manual_seed(5)
        loader = ds.loader(4, shuffle=True, generator=generator, num_workers=2,
                           persistent_workers=True)  # fmt: skip
        return loader, {}

    whole = Seen()
    reference = train(*data()[:1], [whole], **data()[1])
    for epoch in (0, 1, 2):
        assert torch.equal(
            torch.stack([whole.images[epoch, i] for i in range(12)]),
            expected(pack_path, epoch, list(range(12))),
        ), epoch
    saves = SaveTrainingStateCallback(
        tmp_path / "ckpt", every_n_steps=2, every_n_epochs=None, async_write=False
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(*data()[:1], [saves, CrashAt(8)], **data()[1])  # mid third epoch
    after = Seen()
    loaded, kw = data()
    resumed = train(loaded, [after], resume_from=tmp_path / "ckpt", **kw)
    assert after.steps == whole.steps[6:]
    assert all(torch.equal(after.images[k], whole.images[k]) for k in after.images)
    want, got = reference.unwrapped_model.state_dict(), resumed.unwrapped_model.state_dict()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)


# -- 2. a pack path that is wrong says what is there ------------------------------------


def test_a_path_that_does_not_exist_is_named_with_the_packs_beside_it(
    pack_path: Path, tmp_path: Path
) -> None:
    with pytest.raises(PackFormatError) as info:
        PackedDataset(tmp_path / "typo.pack")
    message = str(info.value)
    assert "does not exist" in message and "typo.pack" in message
    assert "p.pack" in message  # the pack next to it


def test_a_file_instead_of_a_pack_directory_is_named_as_a_file(
    pack_path: Path, tmp_path: Path
) -> None:
    csv = tmp_path / "imgs" / "list.csv"
    with pytest.raises(PackFormatError, match=r"is a file, not a pack directory"):
        PackedDataset(csv)
    shard = next(pack_path.glob("*.h5"))
    with pytest.raises(PackFormatError, match=r"inside the pack .*p\.pack"):
        PackedDataset(shard)


def test_a_directory_that_holds_packs_names_them(pack_path: Path, tmp_path: Path) -> None:
    with pytest.raises(PackFormatError, match=r"manifest\.json is missing.*p\.pack"):
        PackedDataset(tmp_path)


# -- 3. skipped rows are listed in CSV line order ---------------------------------------


def test_skipped_rows_are_listed_in_csv_line_order_when_encoding_in_parallel(
    tmp_path: Path,
) -> None:
    import json

    root = tmp_path / "imgs"
    imgs = write_images(root, 40, size=(16, 16))
    rows = [[name, str(i)] for i, (name, _) in enumerate(imgs)]
    for i in range(0, 40, 3):  # undecodable images: bad rows found by the encoding workers
        (root / imgs[i][0]).write_bytes(b"not an image" * (1 + 2000 * (i % 2)))
    rows.insert(5, ["missing.png", "0"])  # a bad row found while parsing the list
    write_csv(root / "list.csv", ["image", "label"], rows)
    for pool in ("threads", "processes"):
        report = pack(
            root, root / "list.csv", tmp_path / f"{pool}.pack", dtype=["int64"], height=8,
            width=8, workers=2, pool=pool, on_error="skip", progress=False,
        )  # fmt: skip
        lines = [row.line for row in report.skipped]
        assert len(lines) == 15 and lines == sorted(lines), (pool, lines)
        manifest = json.loads((tmp_path / f"{pool}.pack" / "manifest.json").read_text())
        assert [row["line"] for row in manifest["extra"]["skipped_rows"]] == lines


# -- 4. EXIF orientation ----------------------------------------------------------------


def _phone_photo(path: Path, orientation: int, size: tuple[int, int] = (24, 14)) -> np.ndarray:
    """A JPEG stored ``size`` (w, h) with an EXIF Orientation tag; returns the upright
    pixels a viewer shows (Pillow's ``exif_transpose`` of the decoded file)."""
    from PIL import Image, ImageOps

    rng = np.random.default_rng(orientation)
    w, h = size
    stored = np.zeros((h, w, 3), np.uint8)
    stored[: h // 2, : w // 3] = (250, 20, 20)  # a red block in the stored top-left corner
    stored += rng.integers(0, 30, stored.shape, dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "PhoneMaker"
    Image.fromarray(stored).save(path, quality=98, exif=exif.tobytes())
    with Image.open(path) as img:
        return np.asarray(ImageOps.exif_transpose(img).convert("RGB"))


@pytest.mark.parametrize("decoder", ["fast", "pillow"])
@pytest.mark.parametrize("orientation", [1, 2, 3, 4, 5, 6, 7, 8])
def test_pack_stores_a_phone_photo_upright_as_viewers_show_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, orientation: int, decoder: str
) -> None:
    from scramjet.data import writer

    if decoder == "pillow":
        monkeypatch.setattr(writer, "simplejpeg_module", lambda: None)
    elif writer.simplejpeg_module() is None:
        pytest.skip("simplejpeg is not installed")
    root = tmp_path / "imgs"
    root.mkdir()
    upright = _phone_photo(root / "a.jpg", orientation)
    h, w = upright.shape[:2]
    write_csv(root / "list.csv", ["image", "label"], [["a.jpg", "0"]])
    pack(
        root, root / "list.csv", tmp_path / "p.pack", dtype=["int64"], height=h, width=w,
        encode="raw", workers=0, progress=False,
    )  # fmt: skip
    assert np.array_equal(PackedDataset(tmp_path / "p.pack")[0]["image"], upright)


@pytest.mark.parametrize("decoder", ["fast", "pillow"])
@pytest.mark.parametrize("orientation", [6, 8])
def test_a_jpeg_frame_of_a_turned_photo_keeps_its_exif_with_orientation_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, orientation: int, decoder: str
) -> None:
    import h5py
    from PIL import Image

    from scramjet.data import writer

    if decoder == "pillow":
        monkeypatch.setattr(writer, "simplejpeg_module", lambda: None)
    root = tmp_path / "imgs"
    root.mkdir()
    upright = _phone_photo(root / "a.jpg", orientation, size=(400, 240))
    write_csv(root / "list.csv", ["image", "label"], [["a.jpg", "0"]])
    pack(
        root, root / "list.csv", tmp_path / "p.pack", dtype=["int64"], height=100, width=60,
        encode="jpeg", workers=0, progress=False,
    )  # fmt: skip
    ds = PackedDataset(tmp_path / "p.pack")
    got = ds[0]["image"].astype(np.int16)
    small = np.asarray(Image.fromarray(upright).resize((60, 100), Image.Resampling.BILINEAR))
    assert np.abs(got - small).mean() < 6  # upright: the turned image differs by ~100
    shard = next((tmp_path / "p.pack").glob("*.h5"))
    with h5py.File(shard) as f:
        frame = bytes(f["image"][: int(f["_offsets/image"][1])])
    with Image.open(__import__("io").BytesIO(frame)) as img:
        exif = img.getexif()
    assert exif.get(0x0112) == 1 and exif.get(0x010F) == "PhoneMaker"  # not turned twice


def test_exif_orientation_false_stores_the_pixels_as_the_file_holds_them(tmp_path: Path) -> None:
    from PIL import Image

    root = tmp_path / "imgs"
    root.mkdir()
    _phone_photo(root / "a.jpg", 6)
    with Image.open(root / "a.jpg") as img:
        stored = np.asarray(img.convert("RGB"))
    write_csv(root / "list.csv", ["image", "label"], [["a.jpg", "0"]])
    pack(
        root, root / "list.csv", tmp_path / "p.pack", dtype=["int64"], height=14, width=24,
        encode="raw", workers=0, progress=False, exif_orientation=False,
    )  # fmt: skip
    assert np.array_equal(PackedDataset(tmp_path / "p.pack")[0]["image"], stored)


@pytest.mark.parametrize("orientation", [3, 6, 7])
def test_a_large_turned_photo_packs_to_the_same_pixels_with_either_decoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, orientation: int
) -> None:
    from PIL import Image

    from scramjet.data import writer

    if writer.simplejpeg_module() is None:
        pytest.skip("simplejpeg is not installed")
    root = tmp_path / "imgs"
    root.mkdir()
    upright = _phone_photo(root / "a.jpg", orientation, size=(480, 256))  # DCT-scaled
    write_csv(root / "list.csv", ["image", "label"], [["a.jpg", "0"]])
    out = []
    for name in ("fast", "pillow"):
        if name == "pillow":
            monkeypatch.setattr(writer, "simplejpeg_module", lambda: None)
        pack(
            root, root / "list.csv", tmp_path / f"{name}.pack", dtype=["int64"], height=60,
            width=40, encode="raw", workers=0, progress=False,
        )  # fmt: skip
        out.append(PackedDataset(tmp_path / f"{name}.pack")[0]["image"])
    assert np.array_equal(out[0], out[1])
    small = np.asarray(Image.fromarray(upright).resize((40, 60), Image.Resampling.BILINEAR))
    assert np.abs(out[0].astype(np.int16) - small).mean() < 6


def test_scramjet_pack_no_exif_orientation_stores_the_pixels_as_held(tmp_path: Path) -> None:
    import argparse

    from PIL import Image

    from scramjet.data import cli

    root = tmp_path / "imgs"
    root.mkdir()
    upright = _phone_photo(root / "a.jpg", 6)
    with Image.open(root / "a.jpg") as img:
        stored = np.asarray(img.convert("RGB"))
    write_csv(root / "list.csv", ["image", "label"], [["a.jpg", "0"]])
    parser = argparse.ArgumentParser()
    cli.configure_parser(parser)
    common = ["--dtype", "int64", "--encode", "raw", "--workers", "0", "--no-progress"]
    for flag, size, want in (
        ([], (24, 14), upright),
        (["--no-exif-orientation"], (14, 24), stored),
    ):
        dst = tmp_path / f"p{len(flag)}.pack"
        args = [str(root), str(root / "list.csv"), str(dst), "--height", str(size[0])]
        assert cli.run(parser.parse_args([*args, "--width", str(size[1]), *common, *flag])) == 0
        assert np.array_equal(PackedDataset(dst)[0]["image"], want)


# -- 5. dtype takes the same forms in Python and on the command line ---------------------


@pytest.mark.parametrize(
    "dtype", ["int64,str", "int64, str", ["int64", "str"], ("int64", "str"), ["int64,str"]]
)
def test_pack_takes_dtype_as_a_list_or_a_comma_separated_string_like_the_cli(
    tmp_path: Path, dtype: Any
) -> None:
    root = tmp_path / "imgs"
    imgs = write_images(root, 3, size=(8, 8))
    write_csv(
        root / "l.csv",
        ["image", "label", "name"],
        [[n, str(i), f"n{i}"] for i, (n, _) in enumerate(imgs)],
    )
    pack(
        root,
        root / "l.csv",
        tmp_path / "p.pack",
        dtype=dtype,
        height=8,
        width=8,
        workers=0,
        progress=False,
    )
    sample = PackedDataset(tmp_path / "p.pack")[2]
    assert (int(sample["label"]), sample["name"]) == (2, "n2")


def test_a_dtype_count_mismatch_names_the_forms_dtype_takes(tmp_path: Path) -> None:
    root = tmp_path / "imgs"
    imgs = write_images(root, 2, size=(8, 8))
    write_csv(root / "l.csv", ["image", "label", "name"], [[n, "0", "a"] for n, _ in imgs])
    with pytest.raises(ValueError, match=r"received \['int64'\].*'int64,str'"):
        pack(
            root,
            root / "l.csv",
            tmp_path / "p.pack",
            dtype="int64",
            height=8,
            width=8,
            workers=0,
            progress=False,
        )


# -- a pack's loader with a random sampler of the user's, under the Trainer ---------------


def _steps_with_resume(
    make: Any, tmp_path: Path, crash: int
) -> tuple[list[Any], list[Any], list[Any]]:
    """(uninterrupted steps, steps before a crash mid second epoch, resumed steps)."""
    whole, crashed, after = Seen(), Seen(), Seen()
    train(make(), [whole])
    saves = SaveTrainingStateCallback(
        tmp_path / "ckpt", every_n_steps=1, every_n_epochs=None, async_write=False
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(make(), [saves, crashed, CrashAt(crash)])
    train(make(), [after], resume_from=tmp_path / "ckpt")
    return whole.steps, crashed.steps, after.steps


@pytest.mark.parametrize("kind", ["subset", "weighted"])
@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_a_pack_loader_with_a_random_sampler_resumes_mid_epoch_on_the_same_samples(
    pack_path: Path, tmp_path: Path, kind: str, backend: str
) -> None:
    from torch.utils.data import SubsetRandomSampler, WeightedRandomSampler

    def make() -> Any:
        torch.manual_seed(7)  # the script seeds torch before it makes the loader
        sampler: Any = (
            SubsetRandomSampler(list(range(8)))
            if kind == "subset"
            else WeightedRandomSampler([1.0] * 12, 8)
        )
        return PackedDataset(pack_path).loader(2, sampler=sampler, backend=backend)

    whole, _, after = _steps_with_resume(make, tmp_path, crash=6)  # 4 steps per epoch
    assert after == whole[5:]  # step 6 (the crash) and the rest, as the uninterrupted run
    epochs = [[i for e, idx in whole if e == k for i in idx] for k in (0, 1)]
    assert epochs[0] != epochs[1]  # still reshuffled every epoch


def test_a_resumed_run_continues_the_order_of_a_loader_made_without_seeding_torch(
    pack_path: Path, tmp_path: Path
) -> None:
    def make() -> Any:
        torch.seed()  # a new process: torch's RNG is not seeded by the script
        return PackedDataset(pack_path).loader(2, shuffle=True)

    _, crashed, after = _steps_with_resume(make, tmp_path, crash=8)  # 6 steps per epoch
    second = [i for e, idx in crashed[:-1] + after if e == 1 for i in idx]
    assert sorted(second) == list(range(12))  # every sample once in the resumed epoch


# -- a pack inside torch.utils.data wrappers, given to the Trainer ----------------------


@pytest.mark.parametrize("wrap", ["subset", "random_split", "concat"])
def test_a_pack_inside_a_torch_wrapper_draws_every_epochs_augmentations_in_the_trainer(
    pack_path: Path, wrap: str
) -> None:
    from torch.utils.data import ConcatDataset, Subset, random_split

    ds = augmented(pack_path)
    data: Any = {
        "subset": lambda: Subset(ds, list(range(12))),
        "random_split": lambda: random_split(ds, [1.0])[0],
        "concat": lambda: ConcatDataset([ds]),
    }[wrap]()
    seen = Seen()
    train(data, [seen], per_device_batch_size=4)
    assert ds.epoch == 2
    for epoch in (0, 1, 2):
        got = torch.stack([seen.images[epoch, i] for i in range(12)])
        assert torch.equal(got, expected(pack_path, epoch, list(range(12)))), epoch


def test_a_callback_that_sets_the_packs_epoch_reaches_a_pack_inside_a_subset(
    pack_path: Path,
) -> None:
    from torch.utils.data import Subset

    ds = augmented(pack_path)

    class PackEpoch(TrainerCallback):  # the workaround docs/data.md gives
        def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
            ds.set_epoch(trainer.state.epoch)

    seen = Seen()
    kwargs = {"num_workers": 1, "persistent_workers": True}
    train(
        Subset(ds, list(range(12))), [PackEpoch(), seen], per_device_batch_size=4,
        train_dataloader_kwargs=kwargs,
    )  # fmt: skip
    for epoch in (0, 1, 2):
        got = torch.stack([seen.images[epoch, i] for i in range(12)])
        assert torch.equal(got, expected(pack_path, epoch, list(range(12)))), epoch
