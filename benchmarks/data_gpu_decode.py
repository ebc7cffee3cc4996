"""JPEG pack batches decoded on a CUDA device against decoding on the CPU, same run.

Every reader hands the training loop uint8 image batches on the GPU, from the same JPEG pack
(synthetic photo-like images, no downloads), same batch size, same order:

* ``CPU decode``: the threaded pack loader decodes with simplejpeg in N threads into pinned
  batch buffers; each batch is copied to the device with ``non_blocking=True``;
* ``GPU decode``: the same loader with ``decode_device="cuda"``: the threads only gather the
  compressed bytes, and nvJPEG (``torchvision.io.decode_jpeg(..., device="cuda")``) decodes
  the whole batch on the device.

Two ceilings come from the same rounds: one thread decoding the pack's bytes from memory with
simplejpeg, times the usable cores (the CPU's limit), and nvJPEG decoding the same bytes from
memory, batch by batch (the GPU's limit). The images the two paths produce are compared:
labels and order must be equal; pixels differ by the decoders' rounding (mean and max absolute
difference printed).

    python benchmarks/data_gpu_decode.py [--n 2048] [--size 224] [--batch 128] [--threads 2,4,0]

Each number in ``--threads`` gives both loaders that many reading threads (0: one per usable
core): how much CPU each GPU gets decides which path is faster.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_read import machine, make_images, usable_cores

from scramjet.data import PackedDataset, pack


def epoch_rate(batches: Iterable[Any]) -> float:
    """Samples/s of one pass, counting until the last batch's images are on the device."""
    torch.cuda.synchronize()
    start, count = time.perf_counter(), 0
    for b in batches:
        count += len(b["image"])
    torch.cuda.synchronize()
    return count / (time.perf_counter() - start)


class ToDevice:
    """A CPU-decoding loader whose pinned batches are moved to the GPU, as a training loop does."""

    def __init__(self, loader: Iterable[dict[str, Any]]) -> None:
        self.loader = loader

    def __iter__(self) -> Any:
        for b in self.loader:
            yield {k: v.to("cuda", non_blocking=True) for k, v in b.items()}


class NvjpegFromMemory:
    """nvJPEG decoding the pack's own bytes, held in host memory, one batch per call."""

    def __init__(self, blobs: list[np.ndarray], batch: int) -> None:
        self.data = [torch.from_numpy(b.copy()) for b in blobs]
        self.batch = batch

    def __iter__(self) -> Any:
        from torchvision.io import decode_jpeg

        for start in range(0, len(self.data), self.batch):
            images = decode_jpeg(self.data[start : start + self.batch], device="cuda")
            yield {"image": images}


class SimplejpegFromMemory:
    """One thread decoding the pack's own bytes with simplejpeg (the CPU's per-core rate)."""

    def __init__(self, blobs: list[np.ndarray], batch: int) -> None:
        self.blobs, self.batch = blobs, batch

    def __iter__(self) -> Any:
        import simplejpeg

        for start in range(0, len(self.blobs), self.batch):
            part = self.blobs[start : start + self.batch]
            yield {"image": [simplejpeg.decode_jpeg(b, colorspace="RGB") for b in part]}


def compare(ds: PackedDataset, batch: int, threads: int) -> str:
    """Labels/order equality and pixel differences between the two paths, whole pack."""
    cpu = ds.loader(batch, num_workers=threads, backend="threads")
    gpu = ds.loader(batch, num_workers=threads, decode_device="cuda")
    diffs, worst, n = 0.0, 0, 0
    for a, b in zip(cpu, gpu, strict=True):
        if not torch.equal(a["label"], b["label"].cpu()):
            raise SystemExit("GPU decode changed the labels or their order")
        d = (a["image"].to("cuda").int() - b["image"].int()).abs()
        diffs += float(d.float().sum())
        worst = max(worst, int(d.max()))
        n += d.numel()
    return f"labels and order equal; pixel |difference| mean {diffs / n:.3f}, max {worst}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048, help="images (default 2048)")
    parser.add_argument("--size", type=int, default=224, help="image side (default 224)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument(
        "--threads", default="2,4,0", help="reading threads, comma-separated (0: one per core)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed epochs per reader (median)")
    parser.add_argument("--quality", type=int, default=90)
    args = parser.parse_args()
    if not torch.cuda.is_available():  # `make bench` runs every script: say so, do not fail
        print("data_gpu_decode.py: skipped: torch sees no CUDA device here")
        return
    from scramjet.data._gpu_decode import encoded_images

    torch.set_num_threads(1)
    counts = [int(t) or usable_cores() for t in args.threads.split(",")]
    threads = max(counts)
    with tempfile.TemporaryDirectory(prefix="scramjet-bench-") as tmp:
        root = Path(tmp)
        make_images(root, args.n, args.size, args.quality)
        pack(root, root / "list.csv", root / "jpeg.pack", encode="jpeg", dtype=["int64"],
             height=args.size, width=args.size, quality=args.quality, shards=4, progress=False,
             workers=threads)  # fmt: skip
        ds = PackedDataset(root / "jpeg.pack")
        blobs = encoded_images(ds, ds.columns[0], list(range(len(ds))))
        readers: dict[str, Iterable[Any]] = {
            "simplejpeg 1 thread, from memory": SimplejpegFromMemory(blobs, args.batch),
            "nvJPEG from memory": NvjpegFromMemory(blobs, args.batch),
        }
        for t in counts:
            readers[f"CPU decode, {t} threads (+ copy to GPU)"] = ToDevice(
                ds.loader(args.batch, num_workers=t, backend="threads")
            )
            readers[f"GPU decode, {t} threads gather"] = ds.loader(
                args.batch, num_workers=t, decode_device="cuda"
            )
        for reader in readers.values():  # warm-up: page cache, nvJPEG handles, allocator
            epoch_rate(reader)
        rates: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(args.rounds):  # interleaved, so drift hits every reader alike
            for name, reader in readers.items():
                rates[name].append(epoch_rate(reader))
        agreement = compare(ds, args.batch, threads)
    med = {name: float(np.median(r)) for name, r in rates.items()}
    ceiling = med["simplejpeg 1 thread, from memory"] * usable_cores()
    nvjpeg = med["nvJPEG from memory"]
    print(machine())
    print(f"GPU: {torch.cuda.get_device_name()}, torchvision nvJPEG")
    print(
        f"{args.n} JPEG images {args.size}x{args.size} (quality {args.quality}), batch "
        f"{args.batch}, medians of {args.rounds} interleaved rounds"
    )
    for name, rate in med.items():
        print(f"  {name:<48} {rate:>10,.0f} samples/s")
    print(f"  CPU ceiling: 1-thread rate x {usable_cores()} cores = {ceiling:,.0f} samples/s")
    for t in counts:
        cpu_rate = med[f"CPU decode, {t} threads (+ copy to GPU)"]
        gpu_rate = med[f"GPU decode, {t} threads gather"]
        print(
            f"{t:>2} threads: GPU decode / CPU decode {gpu_rate / cpu_rate:.2f}x; "
            f"GPU decode / nvJPEG from memory {gpu_rate / nvjpeg:.2f}x"
        )
    print(agreement)


if __name__ == "__main__":
    main()
