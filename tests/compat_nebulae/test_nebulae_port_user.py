"""A nebulae script with only its imports changed: the less common settings a port meets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from scramjet.checkpoint import CheckpointMismatchError
from scramjet.compat.nebulae.astro import dock
from scramjet.compat.nebulae.cockpit import TimeMachine


class _Net(dock.Craft):
    def __init__(self, scope: str = "NET") -> None:
        super().__init__(scope)
        self.enc = torch.nn.Linear(4, 3)
        self.head = torch.nn.Linear(3, 2)

    def run(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(x))


@pytest.mark.parametrize("file", ["", "best", "enc.pth"])
def test_frozen_load_of_a_partial_checkpoint_gives_advice_in_timemachine_words(
    tmp_path: Path, file: str
) -> None:
    tm = TimeMachine(tmp_path, tmp_path)
    tm.drop(_Net(), file=file, save_scope="enc")
    with pytest.raises(CheckpointMismatchError) as caught:
        tm.to(_Net(), file=file, frozen=True)
    text = str(caught.value)
    assert "head.weight" in text
    assert "frozen=False" in text and "ckpt_scope=" in text
    # TimeMachine.to() takes neither strict= nor scope=: advice naming them cannot be followed
    assert "strict=False" not in text and "scope='prefix'" not in text.replace("ckpt_scope", "")


@pytest.mark.parametrize("datum", [0.5, [[0.1, 0.2, 0.3, 0.4]], (1.0, 2.0, 3.0, 4.0)])
def test_coat_of_python_floats_gives_the_default_float_dtype_like_torch(datum: object) -> None:
    coated = dock.coat(datum)
    assert coated.dtype == torch.as_tensor(datum).dtype == torch.float32
    if coated.dim():  # straight into a float32 layer, as torch.tensor(...) would go
        assert dock.Dense(4, 2)(coated.reshape(-1, 4)).dtype == torch.float32


def test_coat_keeps_the_dtype_of_numpy_arrays_and_ints() -> None:
    assert dock.coat(np.zeros(3, np.float64)).dtype == torch.float64
    assert dock.coat([1, 2]).dtype == torch.int64
    assert dock.coat(0.5, as_const=False).dtype == torch.float32


def test_shell_of_a_bfloat16_tensor_gives_float32_numbers() -> None:
    values = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    out = dock.shell(values)
    assert out.dtype == np.float32 and out.tolist() == [1.5, -2.0]
    assert dock.shell(values, as_np=False).dtype == torch.bfloat16  # a tensor keeps its dtype


def _write_images(root: Path, n: int, frames: int = 0) -> Path:
    from PIL import Image

    raw = root / "raw"
    raw.mkdir()
    rows = []
    for i in range(n):
        pixels = np.arange(6 * 5 * 3, dtype=np.uint8).reshape(6, 5, 3) + 7 * i
        Image.fromarray(pixels).save(raw / f"i{i}.png")
        rows.append(f"i{i}.png\t{i % 3}\n")
    (raw / "list.csv").write_text("image\tlabel\n" + "".join(rows))
    return raw


def test_a_comburant_given_as_prep_fn_augments_the_image_column_of_each_item(
    tmp_path: Path,
) -> None:
    from scramjet.compat.nebulae.fuel import Comburant, FuelGenerator, Noise, depot

    raw = _write_images(tmp_path, 6)
    FuelGenerator(str(raw), "list.csv", ["int64"]).generate(
        str(tmp_path / "d.hdf5"), 6, 5, encode="PNG", progress=False, workers=0
    )
    spec = {"image": "uint8", "label": "int64"}
    comb = Comburant(Noise(0.2), seed=4)

    def prep(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        data["image"] = comb(data["image"])
        return data

    direct = depot.Tank(str(tmp_path / "d.hdf5"), spec, 3, shuffle=False, prep_fn=comb)
    inside = depot.Tank(str(tmp_path / "d.hdf5"), spec, 3, shuffle=False, prep_fn=prep)
    plain = depot.Tank(str(tmp_path / "d.hdf5"), spec, 3, shuffle=False)
    for _ in range(4):  # two epochs: the same draws as the Comburant called inside prep_fn
        got, want, raw_batch = direct.next(), inside.next(), plain.next()
        assert torch.equal(got["image"], want["image"])
        assert not torch.equal(got["image"], raw_batch["image"])
        assert torch.equal(got["label"], raw_batch["label"])  # labels are left alone


def test_a_comburant_as_prep_fn_on_items_without_an_image_column_says_what_to_do(
    tmp_path: Path,
) -> None:
    from scramjet.compat.nebulae.fuel import Comburant, Flip, FuelGenerator, depot

    raw = _write_images(tmp_path, 4)
    FuelGenerator(str(raw), "list.csv", ["int64"]).generate(
        str(tmp_path / "d.hdf5"), 6, 5, encode="PNG", progress=False, workers=0
    )

    def fetch(data: dict[str, np.ndarray], idx: int) -> dict[str, np.ndarray]:
        return {"pixels": data["image"][idx], "label": data["label"][idx]}

    tank = depot.Tank(
        str(tmp_path / "d.hdf5"),
        {"image": "uint8", "label": "int64"},
        2,
        fetch_fn=fetch,
        prep_fn=Comburant(Flip(), seed=0),
    )
    with pytest.raises(TypeError, match=r"\['label', 'pixels'\].*def prep\(data\)"):
        tank.next()


def test_loading_the_scope_of_a_nebulae_run_names_the_files_nebulae_wrote(tmp_path: Path) -> None:
    # nebulae's drop() wrote <scope>-<n>.pth straight into save_path; here the default is
    # a folder named after the scope, so the error must point at the files that exist
    net = _Net("cnn")
    torch.save(net.state_dict(), tmp_path / "cnn-10.pth")
    torch.save(net.state_dict(), tmp_path / "cnn-20.pth")
    tm = TimeMachine(tmp_path, tmp_path)
    with pytest.raises(FileNotFoundError) as caught:
        tm.to(_Net("cnn"))
    text = str(caught.value)
    assert "cnn-10.pth" in text and "cnn-20.pth" in text and "file='cnn-20.pth'" in text
    tm.to(restored := _Net("cnn"), file="cnn-20.pth", frozen=True)  # the advice works
    assert torch.equal(restored.head.weight, net.head.weight)


def test_loading_a_missing_file_lists_what_ckpt_path_holds(tmp_path: Path) -> None:
    tm = TimeMachine(tmp_path, tmp_path)
    tm.drop(_Net(), file="epoch_1.pth")
    with pytest.raises(FileNotFoundError, match=r"epoch_2\.pth.*holds.*epoch_1\.pth"):
        tm.to(_Net(), file="epoch_2.pth")


def test_a_first_drop_to_an_absolute_file_works_before_save_path_exists(tmp_path: Path) -> None:
    tm = TimeMachine(tmp_path / "ckpt", tmp_path / "ckpt")
    target = tmp_path / "exports" / "best.pth"
    assert tm.drop(_Net(), file=target) == target
    assert target.is_file()
    tm.to(_Net(), file=target, frozen=True)


def test_rotation_never_deletes_a_file_dropped_outside_save_path(tmp_path: Path) -> None:
    # With max_anchors=1, an export dropped to an absolute path outside save_path was the
    # oldest "anchor" and the next drop deleted it.
    tm = TimeMachine(tmp_path / "ckpt", tmp_path / "ckpt", max_anchors=1)
    export = tmp_path / "elsewhere" / "keep.pth"
    tm.drop(_Net(), file=export)
    tm.drop(_Net(), file="e1.pth")
    tm.drop(_Net(), file="e2.pth")
    assert export.is_file()
    assert not (tmp_path / "ckpt" / "e1.pth").exists()  # inside save_path: rotated
    assert (tmp_path / "ckpt" / "e2.pth").is_file()
