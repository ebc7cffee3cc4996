"""Per-step cost of scramjet's Trainer against a hand-written PyTorch loop.

MLP 784-128-64-10 on in-memory random data, batch 64, 400 optimizer steps, 1 thread,
CPU. Both contenders use the same DataLoader settings (shuffled, no workers) and track
the epoch's mean loss per sample (the Trainer records ``train_loss_epoch``; the
hand-written loop sums ``loss.item() * batch`` as such loops do). The Trainer runs with
``DEFAULT_CALLBACKS``, its progress output sent to a file. Runs are interleaved and
repeated; medians and the ratio are printed. Peers (pytorch-accelerated, HF accelerate,
Lightning) are measured the same way when installed.

Usage: python benchmarks/trainer_overhead.py [--reps 7] [--steps 400]
"""

from __future__ import annotations

import argparse
import io
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

BATCH = 64


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) since ``start``; CPU time is steadier on a busy machine."""
    return time.perf_counter() - start[0], time.process_time() - start[1]


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)
    )


def make_data(steps: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(steps * BATCH, 784, generator=g)
    y = torch.randint(0, 10, (steps * BATCH,), generator=g)
    return TensorDataset(x, y)


def run_plain(data: TensorDataset) -> float:
    torch.manual_seed(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_func = nn.CrossEntropyLoss()
    loader = DataLoader(data, batch_size=BATCH, shuffle=True)
    start = _clock()
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        loss = loss_func(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item() * yb.size(0)
        count += yb.size(0)
    _ = total / count
    return _since(start)


def run_scramjet(data: TensorDataset) -> float:
    from scramjet import Trainer
    from scramjet.callbacks import (
        LogMetricsCallback,
        MoveModulesToDeviceCallback,
        ProgressBarCallback,
        TerminateOnNaNCallback,
    )

    torch.manual_seed(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sink = io.StringIO()  # DEFAULT_CALLBACKS, with progress output sent to a file
    callbacks = [
        MoveModulesToDeviceCallback(),
        TerminateOnNaNCallback(),
        ProgressBarCallback(file=sink),
        LogMetricsCallback(file=sink),
    ]
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=callbacks)
    start = _clock()
    trainer.train(data, num_epochs=1, per_device_batch_size=BATCH)
    return _since(start)


def _peers() -> dict[str, Callable[[TensorDataset], tuple[float, float]]]:
    found: dict[str, Callable[[TensorDataset], tuple[float, float]]] = {}
    for name in ("pytorch_accelerated", "accelerate", "lightning"):
        try:
            __import__(name)
        except ImportError:
            print(f"  ({name} not installed: not measured)")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = make_data(args.steps)
    contenders: dict[str, Callable[[TensorDataset], tuple[float, float]]] = {
        "hand-written loop": run_plain,
        "scramjet Trainer": run_scramjet,
        **_peers(),
    }
    for fn in contenders.values():  # warm-up: imports, allocator, first-call costs
        fn(data)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(args.reps):
        for name, fn in contenders.items():
            times[name].append(fn(data))
    print(
        f"machine: {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} thread, torch {torch.__version__}, "
        f"python {platform.python_version()}"
    )
    print(f"MLP 784-128-64-10, batch {BATCH}, {args.steps} steps, {args.reps} interleaved reps")
    for label, k in (("wall-clock", 0), ("process CPU", 1)):
        base = statistics.median(t[k] for t in times["hand-written loop"])
        print(f"{label} time per step (median of {args.reps}):")
        for name, values in times.items():
            med = statistics.median(t[k] for t in values)
            low = min(t[k] for t in values)
            print(
                f"  {name:<20} {med * 1e3 / args.steps:8.3f} ms/step   ratio {med / base:5.3f}"
                f"   (min {low * 1e3 / args.steps:.3f} ms/step)"
            )


if __name__ == "__main__":
    main()
