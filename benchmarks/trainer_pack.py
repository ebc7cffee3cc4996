"""The Trainer given a JPEG pack: its threaded batch loader vs a DataLoader over the pack.

``trainer.train(PackedDataset(...))`` reads a pack without a transform with the pack's
threaded loader (threads decode whole batches ahead of the training loop). The baseline
is what the same call built before: a DataLoader over the same pack with the same order,
reading in the loop (``num_workers=0``, the Trainer's default) and, for reference, in
``--workers`` worker processes. A ``collate_fn`` (which threads do not take) keeps the
DataLoader. The model is a pooled linear layer, so the loop is data-bound: it shows what
the loader costs the loop when the model runs elsewhere (a GPU). On a CPU-only machine with
a real model, the model and the loader share the same cores.

Each round trains every contender for ``--epochs`` epochs in a rotated order; samples/s
is counted over the epochs after the first (warm page cache), medians over the rounds.

    .venv/bin/python benchmarks/trainer_pack.py [--images 2048] [--size 224] [--rounds 3] \\
        [--model linear|cnn]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import default_collate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_read import machine, make_images

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.data import PackedDataset, pack


class PackTrainer(Trainer):
    def calculate_train_batch_loss(self, batch: dict[str, Any]) -> dict[str, Any]:
        images = batch["image"].permute(0, 3, 1, 2).float().div_(255)
        outputs = self.model(images)
        loss = self.loss_func(outputs, batch["label"])
        return {"loss": loss, "model_outputs": outputs, "batch_size": len(outputs)}


class EpochTimes(TrainerCallback):
    def __init__(self) -> None:
        self.times: list[float] = []

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.times.append(time.perf_counter())

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.times.append(time.perf_counter())


def build(kind: str) -> nn.Module:
    if kind == "cnn":  # two strided convolutions: the model and the loader share the cores
        return nn.Sequential(
            nn.Conv2d(3, 8, 5, stride=4), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
        )  # fmt: skip
    return nn.Sequential(nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.Linear(3 * 64, 10))


def train(path: Path, kwargs: dict[str, Any] | None, args: argparse.Namespace) -> tuple[float, str]:
    """Samples/s over the epochs after the first, and the loader the Trainer built."""
    epochs = args.epochs
    torch.manual_seed(0)
    model = build(args.model)
    times = EpochTimes()
    trainer = PackTrainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), 0.01),
                          callbacks=[times], seed=0)  # fmt: skip
    ds = PackedDataset(path)
    trainer.train(ds, num_epochs=epochs, per_device_batch_size=args.batch,
                  train_dataloader_kwargs=kwargs)  # fmt: skip
    seconds = times.times[-1] - times.times[1]
    return len(ds) * (epochs - 1) / seconds, type(trainer._train_dl).__name__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="the worker-process reference")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", choices=["linear", "cnn"], default="linear",
                        help="linear: data-bound; cnn: the model shares the CPU")  # fmt: skip
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error(
            f"--epochs must be >= 2 (samples/s counts the epochs after the first), got {args.epochs}"
        )
    print(f"machine: {machine()}\nload average (1 min) before: {os.getloadavg()[0]:.2f}")
    root = Path(tempfile.mkdtemp(prefix="scramjet-trainer-pack-"))
    try:
        compare(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def compare(root: Path, args: argparse.Namespace) -> None:
    """Pack the images in ``root``, train each contender ``args.rounds`` times, print."""
    make_images(root, args.images, args.size, 90)
    pack(root, root / "list.csv", root / "p.pack", dtype=["int64"], height=args.size,
         width=args.size, encode="jpeg", quality=90, shards=8, progress=False)  # fmt: skip
    contenders: dict[str, dict[str, Any] | None] = {
        "threads (Trainer default)": None,
        "DataLoader, in the loop": {"collate_fn": default_collate},
        f"DataLoader, {args.workers} workers": {
            "collate_fn": default_collate, "num_workers": args.workers,
        },
    }  # fmt: skip
    names = list(contenders)
    rates: dict[str, list[float]] = {name: [] for name in names}
    built: dict[str, str] = {}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            rate, built[name] = train(root / "p.pack", contenders[name], args)
            rates[name].append(rate)
        print(f"round {r + 1} (load {os.getloadavg()[0]:.2f}): "
              + ", ".join(f"{n} {rates[n][-1]:.0f}/s" for n in names))  # fmt: skip
    base = float(np.median(rates[names[1]]))
    print(f"\n{args.images} JPEG {args.size}x{args.size}, batch {args.batch}, {args.model} model, "
          f"samples/s over epochs 2..{args.epochs}, medians of {args.rounds} rounds")  # fmt: skip
    for name in names:
        med = float(np.median(rates[name]))
        print(f"{name:28} {built[name]:15} {med:8.0f}/s  {med / base:5.2f}x the loop's DataLoader"
              f"  (rounds {', '.join(f'{v:.0f}' for v in rates[name])})")  # fmt: skip
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
