"""Read throughput of packed datasets against loose JPEG files and WebDataset shards.

One run, same synthetic images, same DataLoader settings (workers, batch size,
persistent workers, warm page cache) for every reader; samples/s and ratios against
loose JPEG files decoded with PIL (ImageFolder style) are printed side by side.

    .venv/bin/python benchmarks/data_read.py            # default: 1024 images, 2 workers
    .venv/bin/python benchmarks/data_read.py --n 4096 --workers 4
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import tarfile
import tempfile
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from scramjet.data import PackedDataset, pack


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores, torch {torch.__version__}, Python {platform.python_version()}"


def synthetic_image(rng: np.random.Generator, size: int) -> np.ndarray:
    """A photo-like image: smooth colour fields, edges and fine texture (no downloads)."""
    low = rng.uniform(0, 255, (size // 16, size // 16, 3)).astype(np.uint8)
    img = np.asarray(Image.fromarray(low).resize((size, size), Image.Resampling.BICUBIC), float)
    y, x = np.mgrid[0:size, 0:size]
    for _ in range(3):  # a few hard-edged discs
        cy, cx, r = rng.integers(0, size, 3)
        img[(y - cy) ** 2 + (x - cx) ** 2 < (r // 3) ** 2] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 6, img.shape)  # sensor-like texture
    return np.clip(img, 0, 255).astype(np.uint8)


def make_images(root: Path, n: int, size: int, quality: int) -> list[tuple[str, int]]:
    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    items = []
    for i in range(n):
        name = f"images/{i:06d}.jpg"
        Image.fromarray(synthetic_image(rng, size)).save(root / name, quality=quality)
        items.append((name, i % 10))
    lines = ["image\tlabel"] + [f"{name}\t{label}" for name, label in items]
    (root / "list.csv").write_text("\n".join(lines) + "\n")
    return items


class LooseJPEGs(Dataset):
    """ImageFolder-style baseline: open each file with PIL, convert to RGB, to a tensor."""

    def __init__(self, root: Path, items: list[tuple[str, int]]) -> None:
        self.files = [str(root / name) for name, _ in items]
        self.labels = [label for _, label in items]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> dict[str, Any]:
        with Image.open(self.files[i]) as img:
            arr = np.array(img.convert("RGB"))
        return {"image": torch.from_numpy(arr), "label": self.labels[i]}


def write_tars(root: Path, items: list[tuple[str, int]], shards: int) -> list[str]:
    urls = []
    for k, part in enumerate(np.array_split(np.arange(len(items)), shards)):
        url = str(root / f"wds-{k:04d}.tar")
        with tarfile.open(url, "w") as tar:
            for i in part:
                name, label = items[int(i)]
                for ext, data in (
                    ("jpg", (root / name).read_bytes()),
                    ("cls", str(label).encode()),
                ):
                    info = tarfile.TarInfo(f"{int(i):06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        urls.append(url)
    return urls


def _simplejpeg_handler(key: str, data: bytes) -> Any:
    import simplejpeg

    if key.endswith("jpg"):
        return simplejpeg.decode_jpeg(data, colorspace="RGB")
    return None


def webdataset_loader(urls: list[str], batch: int, workers: int, fast: bool) -> DataLoader:
    import webdataset as wds

    decoder: Any = _simplejpeg_handler if fast else "rgb8"
    ds = (
        wds.WebDataset(urls, shardshuffle=False, empty_check=False)
        .decode(decoder)
        .to_tuple("jpg", "cls")
        .map_tuple(torch.from_numpy, int)
    )
    return DataLoader(ds, batch_size=batch, num_workers=workers, persistent_workers=workers > 0)


def epoch_rate(loader: Iterable[Any]) -> float:
    """Samples/s of one pass over ``loader``."""
    start = time.perf_counter()
    count = 0
    for b in loader:
        count += len(b["image"] if isinstance(b, dict) else b[0])
    return count / (time.perf_counter() - start)


def interleaved_rates(loaders: list[Iterable[Any]], rounds: int) -> list[float]:
    """Median samples/s per loader; loaders take turns, so load from other processes on a
    shared machine hits all of them alike. One untimed warm-up epoch each first."""
    for loader in loaders:
        epoch_rate(loader)
    rates: list[list[float]] = [[] for _ in loaders]
    for _ in range(rounds):
        for k, loader in enumerate(loaders):
            rates[k].append(epoch_rate(loader))
    return [float(np.median(r)) for r in rates]


def decode_rates(blobs: list[bytes]) -> dict[str, float]:
    """Single-thread JPEG decode rate (images/s) of each codec on the same bytes."""
    from scramjet.data.images import jpeg_decoder

    rates = {}
    for name in ("pil", "simplejpeg"):
        _, decode = jpeg_decoder(name)
        start = time.perf_counter()
        for b in blobs:
            decode(b, 3, None)
        rates[name] = len(blobs) / (time.perf_counter() - start)
    return rates


def build_readers(
    root: Path, items: list[tuple[str, int]], args: argparse.Namespace
) -> list[tuple[str, Iterable[Any]]]:
    """Every reader under test, as (name, loader); all use the same workers and batch."""
    common = {
        "dtype": ["int64"],
        "height": args.size,
        "width": args.size,
        "quality": args.quality,
        "shards": 4,
        "progress": False,
    }
    pack(root, root / "list.csv", root / "jpeg.pack", encode="jpeg", **common)
    pack(root, root / "list.csv", root / "raw.pack", encode="raw", **common)
    urls = write_tars(root, items, shards=4)
    gen = torch.Generator().manual_seed(0)
    persistent = args.workers > 0

    def map_loader(ds: Dataset) -> DataLoader:
        return DataLoader(
            ds,
            batch_size=args.batch,
            shuffle=True,
            generator=gen,
            num_workers=args.workers,
            persistent_workers=persistent,
        )

    def batched(path: str, decoder: str = "auto") -> DataLoader:
        ds = PackedDataset(root / path, decoder=decoder)
        return ds.loader(
            args.batch,
            shuffle=True,
            generator=gen,
            num_workers=args.workers,
            persistent_workers=persistent,
        )

    return [
        ("loose JPEG files, PIL (ImageFolder style)", map_loader(LooseJPEGs(root, items))),
        (
            "WebDataset tar shards, PIL ('rgb8')",
            webdataset_loader(urls, args.batch, args.workers, False),
        ),
        (
            "WebDataset tar shards, simplejpeg",
            webdataset_loader(urls, args.batch, args.workers, True),
        ),
        ("pack jpeg, per-sample reads, simplejpeg", map_loader(PackedDataset(root / "jpeg.pack"))),
        ("pack jpeg, batched reads, PIL", batched("jpeg.pack", "pil")),
        ("pack jpeg, batched reads, simplejpeg", batched("jpeg.pack")),
        ("pack raw, per-sample reads", map_loader(PackedDataset(root / "raw.pack"))),
        ("pack raw, batched reads", batched("raw.pack")),
        # Not the same worker setting: raw pixels need no decoding, so reading them in the
        # main process skips the shared-memory transfer from workers (shown separately).
        (
            "pack raw, batched reads, in-process *",
            PackedDataset(root / "raw.pack").loader(args.batch, shuffle=True, generator=gen),
        ),
    ]


def report(
    args: argparse.Namespace, results: list[tuple[str, float]], codec: dict[str, float]
) -> None:
    print(f"machine: {machine()}")
    print(
        f"{args.n} synthetic {args.size}x{args.size} RGB images, JPEG quality {args.quality}, "
        f"batch {args.batch}, {args.workers} DataLoader workers, warm page cache, "
        f"median of {args.epochs} interleaved epochs"
    )
    base = results[0][1]
    print(f"{'reader':<46} {'samples/s':>10} {'vs loose':>9}")
    for name, rate in results:
        print(f"{name:<46} {rate:>10.0f} {rate / base:>8.2f}x")
    print("* num_workers=0 (reads in the main process); every other row uses the same workers")
    rate = dict(results)
    best_jpeg = rate["pack jpeg, batched reads, simplejpeg"]
    wds_pil = rate["WebDataset tar shards, PIL ('rgb8')"]
    wds_fast = rate["WebDataset tar shards, simplejpeg"]
    print(
        f"pack jpeg (batched, simplejpeg) vs WebDataset (PIL): {best_jpeg / wds_pil:.2f}x; "
        f"vs WebDataset (simplejpeg): {best_jpeg / wds_fast:.2f}x"
    )
    print(
        "single-thread JPEG decode, images/s: "
        + ", ".join(f"{k} {v:.0f}" for k, v in codec.items())
        + f" (simplejpeg/PIL {codec['simplejpeg'] / codec['pil']:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024, help="images (default 1024)")
    parser.add_argument("--size", type=int, default=224, help="image side (default 224)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers for all")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per reader (median)")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality of all JPEGs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    with tempfile.TemporaryDirectory(prefix="scramjet-bench-") as tmp:
        root = Path(tmp)
        items = make_images(root, args.n, args.size, args.quality)
        readers = build_readers(root, items, args)
        rates = interleaved_rates([loader for _, loader in readers], args.epochs)
        results = [(name, r) for (name, _), r in zip(readers, rates)]
        codec = decode_rates([(root / name).read_bytes() for name, _ in items[:200]])
    report(args, results, codec)


if __name__ == "__main__":
    main()
