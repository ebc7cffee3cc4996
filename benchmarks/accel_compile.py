"""COMPILE vs PYTORCH (eager) training steps: a small CNN and a transformer block.

On CPU: fp32 eager vs ``accelerate_model(backends=["COMPILE"])``; the compile time (first
step, including the one-time check against eager) is reported apart from steady-state
steps/s. With CUDA present, a second table runs bf16 autocast + COMPILE vs fp32 eager.

    .venv/bin/python benchmarks/accel_compile.py [--steps 30] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accel_common import machine

from scramjet.accel import AccelerationWarning, accelerate_model, active_backend


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.head = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class Block(nn.Module):
    """Pre-norm transformer block + a classification head on the mean token."""

    def __init__(self, d: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return self.head(x.mean(1))


def make_step(model: nn.Module, x: torch.Tensor):
    y = torch.randint(0, 10, (x.shape[0],), device=x.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def timed(step, n: int, device: str) -> float:
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    sync()
    return time.perf_counter() - t0


def bench(base: nn.Module, fast: nn.Module, x: torch.Tensor, steps: int) -> tuple[float, ...]:
    """(first fast step seconds, eager steps/s, fast steps/s), blocks alternated."""
    device = x.device.type
    eager_step, fast_step = make_step(base, x), make_step(fast, x)
    first = timed(fast_step, 1, device)
    timed(eager_step, 2, device)
    timed(fast_step, 2, device)
    block = max(steps // 5, 1)
    eager_times, fast_times = [], []
    for _ in range(5):  # alternate so load drift on a shared machine hits both alike
        eager_times.append(timed(eager_step, block, device))
        fast_times.append(timed(fast_step, block, device))
    return first, block / statistics.median(eager_times), block / statistics.median(fast_times)


def table(device: str, steps: int, fast_kwargs: dict, label: str) -> None:
    cases = {
        "small CNN (32x32x3, batch 64)": (SmallCNN, torch.randn(64, 3, 32, 32)),
        "transformer block (64x128, batch 32)": (Block, torch.randn(32, 64, 128)),
    }
    print(f"{'model':<38} {'eager steps/s':>14} {label + ' steps/s':>22} {'ratio':>7}  first step")
    for name, (cls, x) in cases.items():
        torch.manual_seed(0)
        base = cls().to(device)
        fast = accelerate_model(copy.deepcopy(base), **fast_kwargs)
        x = x.to(device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, eager_rate, fast_rate = bench(base, fast, x, steps)
        note = str(active_backend(fast))
        dropped = [w for w in caught if issubclass(w.category, AccelerationWarning)]
        if dropped:
            note += f" (dropped: {str(dropped[0].message)[:120]})"
        print(
            f"{name:<38} {eager_rate:14.1f} {fast_rate:22.1f} {fast_rate / eager_rate:6.2f}x"
            f"  {first:6.1f} s  [{note}]"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine())
    print("CPU, fp32: eager vs COMPILE")
    table("cpu", args.steps, {"backends": ["COMPILE"]}, "COMPILE")
    if torch.cuda.is_available():
        print("CUDA: fp32 eager vs bf16 autocast + COMPILE")
        table(
            "cuda", args.steps * 10, {"backends": ["COMPILE"], "autocast": "bf16"}, "bf16+COMPILE"
        )
    else:
        print("CUDA: not present, GPU table skipped")


if __name__ == "__main__":
    main()
