"""patch_backprop (meProp, top-k backward) vs dense: step time and accuracy side by side.

An MLP (256 -> 1024 -> 1024 -> 10) on a synthetic 10-class task (noisy Gaussian classes
whose centres overlap), trained for the same number of samples at batch 8, 64 and
256 with SGD+momentum. Sparse keeps 10% of each hidden layer's output gradient; the head
stays dense.

    .venv/bin/python benchmarks/accel_sparse.py [--samples 12288] [--ratio 0.1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accel_common import machine

from scramjet.accel import SparseBackpropConfig, apply_sparse_backprop


def make_task(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """10 Gaussian classes in 256-d whose centres are shared by train and test splits."""
    centres = torch.randn(10, 256, generator=torch.Generator().manual_seed(123)) * 0.12
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    x = centres[y] + torch.randn(n, 256, generator=g)
    return x, y


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )  # fmt: skip


def run(batch: int, sparse: bool, ratio: float, data: tuple, samples: int) -> tuple[float, float]:
    """(ms per training step, test accuracy) after ``samples`` training samples."""
    (x, y), (xt, yt) = data
    torch.manual_seed(0)
    model = mlp()
    if sparse:
        apply_sparse_backprop(model, SparseBackpropConfig(ratio=ratio))
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * (batch / 64) ** 0.5, momentum=0.9)
    steps = samples // batch
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(1))
    elapsed = 0.0
    for s in range(steps):
        idx = perm[(s * batch) % len(x) : (s * batch) % len(x) + batch]
        t0 = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        elapsed += time.perf_counter() - t0
    with torch.no_grad():
        acc = float((model(xt).argmax(1) == yt).float().mean())
    return 1e3 * elapsed / steps, acc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=12288)
    parser.add_argument("--ratio", type=float, default=0.1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine())
    data = (make_task(8192, 0), make_task(2048, 1))
    print(f"MLP 256-1024-1024-10, {args.samples} training samples, k = {args.ratio:.0%} of units")
    print(f"{'batch':>5} {'dense ms/step':>14} {'sparse ms/step':>15} {'speed':>7}"
          f" {'dense acc':>10} {'sparse acc':>11}")  # fmt: skip
    for batch in (8, 64, 256):
        dense_ms, dense_acc = run(batch, False, args.ratio, data, args.samples)
        sparse_ms, sparse_acc = run(batch, True, args.ratio, data, args.samples)
        print(
            f"{batch:5d} {dense_ms:14.2f} {sparse_ms:15.2f} {dense_ms / sparse_ms:6.2f}x"
            f" {100 * dense_acc:9.1f}% {100 * sparse_acc:10.1f}%"
        )


if __name__ == "__main__":
    main()
