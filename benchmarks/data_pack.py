"""Packing throughput and bytes on disk per encoding.

One run on the same synthetic source JPEGs: a serial PIL resize+encode loop (the work a
hand-written packer does, without writing anything) is the baseline; then
``scramjet.data.pack`` with each encoding and worker count, with samples/s, ratio, and
bytes on disk against the loose source files and a WebDataset-style tar of them.

    .venv/bin/python benchmarks/data_pack.py            # default: 512 images, 256 -> 224 px
    .venv/bin/python benchmarks/data_pack.py --n 4096 --workers 8
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import torch
from data_read import machine, make_images, write_tars
from PIL import Image

from scramjet.data import pack


def serial_baseline(root: Path, names: list[str], size: int, quality: int) -> float:
    """Samples/s of a plain loop: open, convert to RGB, resize, encode JPEG in memory."""
    start = time.perf_counter()
    for name in names:
        with Image.open(root / name) as img:
            small = img.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
        small.save(io.BytesIO(), format="JPEG", quality=quality)
    return len(names) / (time.perf_counter() - start)


def measure(args: argparse.Namespace) -> tuple[dict[str, float], list[tuple[str, float, int]]]:
    """Make the source images, then time the baseline, a tar copy and every pack run."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="scramjet-bench-") as tmp:
        root = Path(tmp)
        items = make_images(root, args.n, args.src_size, args.quality)
        base = {"loose_bytes": float(sum((root / n).stat().st_size for n, _ in items))}
        start = time.perf_counter()
        urls = write_tars(root, items, shards=4)
        base["tar_rate"] = args.n / (time.perf_counter() - start)
        base["tar_bytes"] = float(sum(Path(u).stat().st_size for u in urls))
        base["serial"] = serial_baseline(root, [n for n, _ in items], args.size, args.quality)
        runs = [("jpeg", 1), ("jpeg", args.workers), ("png", args.workers), ("raw", args.workers)]
        for encode, workers in runs:
            report = pack(
                root,
                root / "list.csv",
                root / f"{encode}-{workers}.pack",
                dtype=["int64"],
                height=args.size,
                width=args.size,
                encode=encode,
                quality=args.quality,
                shards=4,
                workers=workers,
                progress=False,
            )
            rows.append(
                (
                    f"pack encode={encode}, workers={workers}",
                    report.num_samples / report.seconds,
                    report.bytes,
                )
            )
    return base, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="images (default 512)")
    parser.add_argument("--src-size", type=int, default=256, help="source image side")
    parser.add_argument("--size", type=int, default=224, help="packed image side")
    parser.add_argument("--workers", type=int, default=2, help="encoding processes")
    parser.add_argument("--quality", type=int, default=90)
    args = parser.parse_args()
    torch.set_num_threads(1)
    base, rows = measure(args)
    n, serial = args.n, base["serial"]
    print(f"machine: {machine()}")
    print(
        f"{n} synthetic {args.src_size}x{args.src_size} JPEGs (quality {args.quality}) "
        f"packed to {args.size}x{args.size}, 4 shards"
    )
    print(
        f"{'method':<34} {'samples/s':>10} {'vs serial':>10} {'MB on disk':>11} "
        f"{'bytes/sample':>13}"
    )
    print(
        f"{'serial PIL resize+encode (baseline)':<34} {serial:>10.0f} {1.0:>9.2f}x "
        f"{'-':>11} {'-':>13}"
    )
    loose = base["loose_bytes"]
    print(f"{'loose source files':<34} {'-':>10} {'-':>10} {loose / 1e6:>11.1f} {loose / n:>13.0f}")
    tar_rate, tar_bytes = base["tar_rate"], base["tar_bytes"]
    print(
        f"{'tar shards of the sources (copy)':<34} {tar_rate:>10.0f} {tar_rate / serial:>9.2f}x "
        f"{tar_bytes / 1e6:>11.1f} {tar_bytes / n:>13.0f}"
    )
    for name, rate, size in rows:
        print(
            f"{name:<34} {rate:>10.0f} {rate / serial:>9.2f}x {size / 1e6:>11.1f} {size / n:>13.0f}"
        )


if __name__ == "__main__":
    main()
