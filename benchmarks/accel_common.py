"""Shared helpers for the accel benchmarks (run alone, this prints the machine)."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from PIL import Image

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.join(REPO, ".bench")


def machine() -> str:
    """CPU model, cores, torch version, threads and GPU, on one line."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"torch threads {torch.get_num_threads()}, {gpu}, load avg {load:.1f}"
    )


def make_images(folder: str, n: int, size: int, ext: str, seed: int = 0) -> list[str]:
    """n two-class images (class 1 has a bright centre square) as ``ext`` files; reused."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        label = i % 2
        path = os.path.join(folder, f"img_{i:05d}_{label}.{ext}")
        paths.append(path)
        if os.path.exists(path):
            continue
        base = rng.integers(0, 160, size=(size // 8, size // 8, 3), dtype=np.uint8)
        img = np.kron(base, np.ones((8, 8, 1), dtype=np.uint8))  # photo-like blocks
        img = np.clip(img.astype(int) + rng.integers(0, 40, size=img.shape), 0, 255)
        if label:
            lo, hi = size * 2 // 7, size * 5 // 7
            img[lo:hi, lo:hi] = np.clip(img[lo:hi, lo:hi] + 90, 0, 255)
        Image.fromarray(img.astype(np.uint8)).save(path, quality=90)
    return paths


def label_of(path: str) -> int:
    return int(path.rsplit("_", 1)[1][0])


def timed_epochs(epochs: int, run_epoch: Callable[[], int]) -> list[float]:
    """Samples/s of each epoch; ``run_epoch`` returns the number of samples it processed."""
    rates = []
    for _ in range(epochs):
        start = time.perf_counter()
        n = run_epoch()
        rates.append(n / (time.perf_counter() - start))
    return rates


def fmt_rates(rates: Iterable[float]) -> str:
    return " / ".join(f"{r:7.1f}" for r in rates)


def ratio_row(name: str, rates: list[float], base: list[float], extra: Any = "") -> str:
    ratios = " / ".join(f"{r / b:5.2f}x" for r, b in zip(rates, base))
    return f"{name:<34} {fmt_rates(rates)}   vs plain {ratios} {extra}"


if __name__ == "__main__":
    print(machine())
