"""Data-bound pipeline: JPEG files decoded and resized per item, a tiny model.

Plain Dataset vs CachedDataset (no preloading) vs CachedDataset(preloaded_data=2), the same
DataLoader settings (num_workers, batch size) and torch threads for all. Prints samples/s
per epoch and the ratio to the plain Dataset.

    .venv/bin/python benchmarks/accel_data.py [--images 384] [--epochs 3] [--workers 0] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accel_common import BENCH_DIR, label_of, machine, make_images, ratio_row, timed_epochs

from scramjet.accel import CachedDataset


class JpegDataset(Dataset):
    """Decode a JPEG, resize to 64x64, return (float tensor CHW, label)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        with Image.open(self.paths[i]) as img:
            small = img.convert("RGB").resize((64, 64), Image.BILINEAR)
        arr = np.asarray(small, dtype=np.float32) / 255.0
        return torch.from_numpy(arr).permute(2, 0, 1).contiguous(), label_of(self.paths[i])


def run(dataset: Dataset, epochs: int, workers: int) -> list[float]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.AvgPool2d(8), torch.nn.Flatten(), torch.nn.Linear(192, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(
        dataset, batch_size=32, shuffle=True, num_workers=workers, persistent_workers=workers > 0
    )

    def epoch() -> int:
        n = 0
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            n += len(y)
        return n

    return timed_epochs(epochs, epoch)


def decode_rate(paths: list[str], threads: int) -> float:
    """Items/s decoding the first 128 files on ``threads`` threads, no model, no cache."""
    ds = JpegDataset(paths[:128])
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(ds.__getitem__, range(len(ds))))
    return len(ds) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=384)
    parser.add_argument("--size", type=int, default=384, help="stored JPEG side (pixels)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    paths = make_images(os.path.join(BENCH_DIR, f"jpeg{args.size}"), args.images, args.size, "jpg")
    print(machine())
    print(f"{args.images} JPEGs {args.size}px -> 64px, batch 32, num_workers={args.workers}")
    contenders = {
        "plain Dataset": lambda: JpegDataset(paths),
        "CachedDataset": lambda: CachedDataset(JpegDataset(paths), probe=False),
        "CachedDataset(preloaded_data=2)": lambda: CachedDataset(
            JpegDataset(paths), preloaded_data=2, probe=False
        ),
    }
    # Rounds alternate the contenders so load drift on a shared machine hits all of them.
    results: dict[str, list[list[float]]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, make in contenders.items():
            results[name].append(run(make(), args.epochs, args.workers))
    median = {k: [float(np.median(col)) for col in zip(*v)] for k, v in results.items()}
    headroom = [decode_rate(paths, 2) / decode_rate(paths, 1) for _ in range(args.rounds)]
    print(f"{'contender':<34} samples/s by epoch (median of {args.rounds} rounds)")
    for name, rates in median.items():
        print(ratio_row(name, rates, median["plain Dataset"]))
    print(
        f"ceiling for epoch 1 here: decoding on 2 threads vs 1 = {np.median(headroom):.2f}x "
        "(what the cores left by other processes allow)"
    )


if __name__ == "__main__":
    main()
