"""Cost of shard verification when a pack is first opened, side by side.

One run, the same packs (JPEG and raw, several shards, synthetic photo-like images):
the time to build a ``PackedDataset`` and open every shard (read one sample of each)
with ``verify=False`` (sizes, sample counts and offset tables only), the default
``verify="open"`` (each shard's SHA-256 on its first open) and ``verify=True`` (every
shard hashed in the constructor), next to one in-process epoch of batched reads, so the
check can be read as a fraction of an epoch. Warm page cache (the packs were just
written); with a cold cache the hash also reads the shards from disk, which the first
epoch would do anyway.

    .venv/bin/python benchmarks/data_verify.py             # 2048 images, 224x224
    .venv/bin/python benchmarks/data_verify.py --n 8192 --shards 16
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from data_read import machine, make_images

from scramjet.data import PackedDataset, pack
from scramjet.data.format import file_sha256


def open_seconds(path: Path, verify: bool | str) -> float:
    """Build the dataset and open every shard (one sample read from each)."""
    start = time.perf_counter()
    ds = PackedDataset(path, verify=verify)
    first = 0
    for info in ds.manifest.shards:
        ds.read(first)
        first += info.samples
    return time.perf_counter() - start


def epoch_seconds(path: Path, batch: int) -> float:
    ds = PackedDataset(path, verify=False)
    start = time.perf_counter()
    for _ in ds.loader(batch, shuffle=True):
        pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048, help="images (default 2048)")
    parser.add_argument("--size", type=int, default=224, help="image side (default 224)")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5, help="timed opens per setting")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(
        f"{args.n} synthetic {args.size}x{args.size} RGB images, {args.shards} shards, "
        f"warm page cache, median of {args.rounds} opens"
    )
    header = (
        f"{'pack':<6} {'MiB':>7} {'verify=False':>13} {'default':>10} {'verify=True':>12} "
        f"{'hash GiB/s':>11} {'epoch':>8} {'check/epoch':>12}"
    )
    print(header)
    with tempfile.TemporaryDirectory(prefix="scramjet-bench-") as tmp:
        root = Path(tmp)
        make_images(root, args.n, args.size, 90)
        for encode in ("jpeg", "raw"):
            dst = root / f"{encode}.pack"
            pack(root, root / "list.csv", dst, dtype=["int64"], height=args.size,
                 width=args.size, encode=encode, quality=90, shards=args.shards,
                 progress=False)  # fmt: skip
            files = sorted(dst.glob("shard-*.h5"))
            size = sum(f.stat().st_size for f in files)
            for f in files:  # warm the page cache
                file_sha256(f)
            times: dict[str, list[float]] = {"off": [], "open": [], "all": []}
            for _ in range(args.rounds):  # interleaved, so machine load hits all alike
                times["off"].append(open_seconds(dst, False))
                times["open"].append(open_seconds(dst, "open"))
                times["all"].append(open_seconds(dst, True))
            med = {k: statistics.median(v) for k, v in times.items()}
            start = time.perf_counter()
            for f in files:
                file_sha256(f)
            rate = size / (time.perf_counter() - start) / 2**30
            epoch = epoch_seconds(dst, args.batch)
            print(
                f"{encode:<6} {size / 2**20:>7.1f} {med['off'] * 1e3:>10.1f} ms "
                f"{med['open'] * 1e3:>7.1f} ms {med['all'] * 1e3:>9.1f} ms {rate:>11.2f} "
                f"{epoch:>7.2f}s {(med['open'] - med['off']) / epoch:>11.1%}"
            )
    print(
        "default = verify='open' (SHA-256 of each shard on first open); check/epoch = "
        "(default - verify=False) / one in-process epoch of batched reads"
    )


if __name__ == "__main__":
    main()
