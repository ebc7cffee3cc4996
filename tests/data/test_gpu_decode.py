"""Decoding JPEG batches on a CUDA device, and the CPU fallback where that is not possible.

The fallback and the batch plumbing (order, labels, other columns) run everywhere; the
decode itself needs CUDA and torchvision and is marked ``gpu``. Tolerance against the CPU
decoders (JPEG decoders differ in IDCT and chroma upsampling): mean absolute difference
at most 1.5 grey levels and largest difference at most 40 per batch; labels and order
identical.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import Sampler

import scramjet.data._gpu_decode as gpu
from scramjet.data import PackedDataset, pack
from scramjet.data._threads import ThreadedLoader
from scramjet.data.images import jpeg_decoder

ORDER = [7, 2, 11, 0, 5, 9, 1, 3, 10, 4, 8, 6]
MEAN_TOL, MAX_TOL = 1.5, 40


class ListSampler(Sampler[int]):
    def __init__(self, order: list[int]) -> None:
        self.order = order

    def __iter__(self) -> Any:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)


def make_pack(folder: tuple[Path, Any], tmp_path: Path, encode: str) -> PackedDataset:
    root, _ = folder
    pack(
        root, root / "list.csv", tmp_path / f"{encode}.pack", dtype=["int64"], height=32,
        width=40, encode=encode, shards=3, workers=0, progress=False,
    )  # fmt: skip
    return PackedDataset(tmp_path / f"{encode}.pack")


def cpu_batches(ds: PackedDataset) -> list[dict[str, Any]]:
    return list(ds.loader(5, sampler=ListSampler(ORDER), backend="processes"))


def test_without_a_usable_device_it_warns_and_decodes_on_the_cpu(
    folder: Any, tmp_path: Path
) -> None:
    for encode in ("jpeg", "raw"):
        ds = make_pack(folder, tmp_path, encode)
        reason = gpu.decode_unavailable(torch.device("cuda"), ds.columns[0])
        assert reason is not None  # no CUDA or no torchvision here, or not a JPEG pack
        if torch.cuda.is_available() and encode == "jpeg":
            continue  # the device path itself: the gpu tests below
        with pytest.warns(RuntimeWarning, match="decoding on the CPU instead") as caught:
            loader = ds.loader(5, sampler=ListSampler(ORDER), decode_device="cuda")
        assert len(caught) == 1 and reason in str(caught[0].message)
        assert caught[0].filename == __file__  # the warning points at the caller's line
        assert isinstance(loader, ThreadedLoader) and loader.decode_device is None
        got, want = list(loader), cpu_batches(ds)
        assert len(got) == len(want) == 3
        for a, b in zip(got, want):
            assert torch.equal(a["image"], b["image"]) and torch.equal(a["label"], b["label"])
    assert "only JPEG images" in str(gpu.decode_unavailable(torch.device("cuda"), ds.columns[0]))
    assert "must be a CUDA device" in str(gpu.decode_unavailable(torch.device("cpu"), None))
    with pytest.raises(ValueError, match="must name a CUDA device"):
        ds.loader(5, decode_device="nonsense")


def test_device_batches_keep_order_labels_and_columns(
    folder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The device path's plumbing, with a CPU decoder standing in for the device's."""
    ds = make_pack(folder, tmp_path, "jpeg")
    decode = jpeg_decoder("auto")[1]
    calls: list[int] = []

    def stand_in(encoded: list[np.ndarray], channels: int, device: torch.device) -> torch.Tensor:
        calls.append(len(encoded))
        return torch.from_numpy(np.stack([decode(b, channels, None) for b in encoded]))

    monkeypatch.setattr(gpu, "usable_decode_device", lambda device, column: torch.device("cpu"))
    monkeypatch.setattr(gpu, "decode_on_device", stand_in)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = ds.loader(5, sampler=ListSampler(ORDER), decode_device="cuda")
    assert isinstance(loader, ThreadedLoader) and loader.decode_device == torch.device("cpu")
    got, want = list(loader), cpu_batches(ds)
    assert sorted(calls) == [2, 5, 5]  # worker threads decode in any order; batches below keep it
    for a, b in zip(got, want):
        assert list(a) == list(b) == ["image", "label"]
        assert torch.equal(a["label"], b["label"]) and torch.equal(a["image"], b["image"])


def assert_close_to_cpu(device_images: torch.Tensor, cpu_images: torch.Tensor) -> None:
    diff = (device_images.cpu().int() - cpu_images.int()).abs()
    assert float(diff.float().mean()) <= MEAN_TOL, float(diff.float().mean())
    assert int(diff.max()) <= MAX_TOL, int(diff.max())


@pytest.mark.gpu
def test_jpeg_batches_decode_on_the_device(folder: Any, tmp_path: Path) -> None:
    ds = make_pack(folder, tmp_path, "jpeg")
    loader = ds.loader(5, sampler=ListSampler(ORDER), decode_device="cuda")
    assert isinstance(loader, ThreadedLoader) and loader.decode_device is not None
    got, want = list(loader), cpu_batches(ds)
    for a, b in zip(got, want):
        assert a["image"].device.type == "cuda" and a["image"].dtype == torch.uint8
        assert a["image"].shape == b["image"].shape
        assert torch.equal(a["label"], b["label"])
        assert_close_to_cpu(a["image"], b["image"])


@pytest.mark.gpu
def test_cpu_decoded_batches_are_pinned_when_cuda_is_present(folder: Any, tmp_path: Path) -> None:
    ds = make_pack(folder, tmp_path, "jpeg")
    loader = ds.loader(5, sampler=ListSampler(ORDER))
    assert isinstance(loader, ThreadedLoader) and loader.pin_memory
    kept = list(loader)
    assert all(b["image"].is_pinned() for b in kept)
    moved = [b["image"].to("cuda", non_blocking=True) for b in kept]
    torch.cuda.synchronize()
    for a, b in zip(moved, cpu_batches(ds)):
        assert torch.equal(a.cpu(), b["image"])
