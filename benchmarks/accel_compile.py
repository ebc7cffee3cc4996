"""COMPILE vs PYTORCH (eager) training steps: a small CNN and a transformer block.

On CPU: fp32 eager vs ``accelerate_model(backends=["COMPILE"])``; the compile time (first
step, including the one-time check against eager) is reported apart from steady-state
steps/s. With CUDA present, a second table runs bf16 autocast + COMPILE vs fp32 eager (torch's
default fp32 settings: cuDNN convolutions in TF32, matrix products in full fp32) on the same
small models (launch-bound on a large GPU) and on models sized for one: a ResNet-18-style CNN
(batch 256, 3x224x224) and a 4-block transformer (d 512, 8 heads, 256 tokens, batch 32); the
CNN also with ``channels_last=True``; the small models also with ``cuda_graphs=True``.

    .venv/bin/python benchmarks/accel_compile.py [--steps 30] [--threads 1] [--skip-cpu]
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

    def mix(self, x: torch.Tensor) -> torch.Tensor:
        """The block without its head: attention and MLP, each with a residual."""
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mix(x).mean(1))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
        )  # fmt: skip
        self.skip: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class ResNetStyle(nn.Module):
    """ResNet-18's layout: 7x7 stem, four stages of two basic blocks, pooled linear head."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        ]  # fmt: skip
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean((2, 3)))


class SmallTransformer(nn.Module):
    def __init__(self, d: int = 512, heads: int = 8, depth: int = 4) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks[:-1]:
            x = block.mix(x)
        return self.blocks[-1](x)


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


SMALL = {
    "small CNN (32x32x3, batch 64)": (SmallCNN, (64, 3, 32, 32), {}),
    "transformer block (64x128, batch 32)": (Block, (32, 64, 128), {}),
}
GPU_SIZED = {
    "ResNet-18-style (224x224x3, batch 256)": (ResNetStyle, (256, 3, 224, 224), {}),
    "ResNet-18-style, channels_last": (ResNetStyle, (256, 3, 224, 224), {"channels_last": True}),
    "transformer, 4 blocks (256x512, batch 32)": (SmallTransformer, (32, 256, 512), {}),
}


def table(device: str, steps: int, fast_kwargs: dict, label: str, cases: dict) -> None:
    print(f"{'model':<42} {'eager steps/s':>14} {label + ' steps/s':>22} {'ratio':>7}  first step")
    for name, (cls, shape, extra) in cases.items():
        torch.manual_seed(0)
        base = cls().to(device)
        fast = accelerate_model(copy.deepcopy(base), **fast_kwargs, **extra)
        x = torch.randn(shape, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, eager_rate, fast_rate = bench(base, fast, x, steps)
        note = str(active_backend(fast))
        dropped = [w for w in caught if issubclass(w.category, AccelerationWarning)]
        if dropped:
            note += f" (dropped: {str(dropped[0].message)[:400]})"
        print(
            f"{name:<42} {eager_rate:14.1f} {fast_rate:22.1f} {fast_rate / eager_rate:6.2f}x"
            f"  {first:6.1f} s  [{note}]"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-cpu", action="store_true", help="only the CUDA tables")
    parser.add_argument("--gpu-sized", action="store_true", help="only the GPU-sized CUDA table")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine())
    if not (args.skip_cpu or args.gpu_sized):
        print("CPU, fp32: eager vs COMPILE")
        table("cpu", args.steps, {"backends": ["COMPILE"]}, "COMPILE", SMALL)
    if torch.cuda.is_available():
        print(f"CUDA ({torch.cuda.get_device_name()}): fp32 eager vs bf16 autocast + COMPILE")
        fast = {"backends": ["COMPILE"], "autocast": "bf16"}
        if not args.gpu_sized:
            table("cuda", args.steps * 10, fast, "bf16+COMPILE", SMALL)
            graphs = {**fast, "cuda_graphs": True}  # launch-bound models: replay whole steps
            table("cuda", args.steps * 10, graphs, "bf16+COMPILE+graphs", SMALL)
        table("cuda", args.steps * 2, fast, "bf16+COMPILE", GPU_SIZED)
    else:
        print("CUDA: not present, GPU table skipped")


if __name__ == "__main__":
    main()
