"""Per-step cost of scramjet's Trainer against a hand-written PyTorch loop.

MLP 784-128-64-10 on in-memory random data, batch 64, 400 optimizer steps, 1 thread,
CPU. ``--device cuda`` runs the same on a CUDA device: every contender reads batches from a
pinned-memory DataLoader and moves them with ``non_blocking=True`` (what the Trainer does);
``--hidden``/``--batch`` make the model wide enough that the device, not Python, sets the
step time. Both contenders use the same DataLoader settings (shuffled, no workers) and track
the epoch's mean loss per sample (the Trainer records ``train_loss_epoch``; the
hand-written loop sums ``loss.item() * batch`` as such loops do). The Trainer runs with
``DEFAULT_CALLBACKS``, its progress output sent to a file. Runs are interleaved and
repeated; medians and the ratio are printed.

Peers are measured in the same process, interleaved with the others, when importable:
HF accelerate (``Accelerator`` + ``prepare`` + ``accelerator.backward``), pytorch-accelerated
(its ``Trainer`` with its default callbacks) and Lightning (``LightningModule`` logging the
epoch loss, ``lightning.Trainer`` with its default progress bar). Every peer gets the same
DataLoader settings (no workers; pytorch-accelerated would otherwise start one worker per
core), its console output sent to a file, and no checkpoint or log files written.
``--install-peers`` installs pytorch-accelerated and Lightning from PyPI into
``.bench/peers`` (next to, not into, this environment: no dependency is resolved, so the
installed torch is left alone) and puts that folder on ``sys.path``.

Usage: python benchmarks/trainer_overhead.py [--reps 7] [--steps 400] [--install-peers]
       [--device cuda] [--hidden 128] [--batch 64]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

BATCH = 64
HIDDEN = 128
DEVICE = torch.device("cpu")
PEER_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".bench", "peers"
)
PEER_PACKAGES = ("pytorch-accelerated==0.1.61", "lightning==2.6.6")

Timing = tuple[float, float]


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) since ``start``; CPU time is steadier on a busy machine."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()  # the last step's kernels are part of the run
    return time.perf_counter() - start[0], time.process_time() - start[1]


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(784, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN // 2), nn.ReLU(),
        nn.Linear(HIDDEN // 2, 10),
    ).to(DEVICE)  # fmt: skip


def make_loader(data: TensorDataset) -> DataLoader:
    """The DataLoader every hand-written contender uses: the Trainer's settings."""
    return DataLoader(data, batch_size=BATCH, shuffle=True, pin_memory=DEVICE.type == "cuda")


def make_data(steps: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(steps * BATCH, 784, generator=g)
    y = torch.randint(0, 10, (steps * BATCH,), generator=g)
    return TensorDataset(x, y)


def run_plain(data: TensorDataset) -> Timing:
    torch.manual_seed(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_func = nn.CrossEntropyLoss()
    loader = make_loader(data)
    start = _clock()
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(DEVICE, non_blocking=True), yb.to(DEVICE, non_blocking=True)
        loss = loss_func(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item() * yb.size(0)
        count += yb.size(0)
    _ = total / count
    return _since(start)


def run_scramjet(data: TensorDataset) -> Timing:
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
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=callbacks, device=DEVICE)
    start = _clock()
    trainer.train(data, num_epochs=1, per_device_batch_size=BATCH)
    return _since(start)


def run_accelerate(data: TensorDataset) -> Timing:
    from accelerate import Accelerator

    torch.manual_seed(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_func = nn.CrossEntropyLoss()
    accelerator = Accelerator(cpu=DEVICE.type == "cpu")
    start = _clock()
    model, opt, loader = accelerator.prepare(model, opt, make_loader(data))
    model.train()
    total, count = 0.0, 0
    for xb, yb in loader:
        loss = loss_func(model(xb), yb)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
        total += loss.item() * yb.size(0)
        count += yb.size(0)
    _ = total / count
    elapsed = _since(start)
    accelerator.free_memory()
    return elapsed


def run_pytorch_accelerated(data: TensorDataset) -> Timing:
    from pytorch_accelerated import Trainer as PATrainer

    torch.manual_seed(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    trainer = PATrainer(model=model, loss_func=nn.CrossEntropyLoss(), optimizer=opt)
    sink = io.StringIO()  # its default callbacks print and draw a tqdm bar: send them to a file
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        start = _clock()
        trainer.train(
            train_dataset=data,
            num_epochs=1,
            per_device_batch_size=BATCH,
            train_dataloader_kwargs={"num_workers": 0, "pin_memory": DEVICE.type == "cuda"},
        )
        return _since(start)


def run_lightning(data: TensorDataset) -> Timing:
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = make_model()
            self.loss_func = nn.CrossEntropyLoss()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = self.loss_func(self.net(xb), yb)
            self.log("train_loss", loss, on_step=False, on_epoch=True, batch_size=yb.size(0))
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)  # banner lines per fit
    torch.manual_seed(1)
    module = Module()
    sink = io.StringIO()
    quiet = (contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink))
    with quiet[0], quiet[1], warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no workers" advice, printed on every fit
        trainer = L.Trainer(
            max_epochs=1,
            accelerator=DEVICE.type,
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_model_summary=False,
        )
        start = _clock()
        trainer.fit(module, make_loader(data))
        return _since(start)


def install_peers() -> None:
    """pytorch-accelerated and Lightning into .bench/peers, without touching this environment."""
    os.makedirs(PEER_DIR, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade"]
    subprocess.run([*cmd, "--target", PEER_DIR, *PEER_PACKAGES], check=True)


def _peers() -> dict[str, Callable[[TensorDataset], Timing]]:
    if os.path.isdir(PEER_DIR) and PEER_DIR not in sys.path:
        sys.path.append(PEER_DIR)  # after this environment's packages: its torch wins
    runners = {
        "accelerate": ("HF accelerate loop", run_accelerate),
        "pytorch_accelerated": ("pytorch-accelerated", run_pytorch_accelerated),
        "lightning": ("Lightning", run_lightning),
    }
    found: dict[str, Callable[[TensorDataset], Timing]] = {}
    for module, (label, fn) in runners.items():
        try:
            __import__(module)
        except ImportError as exc:
            print(f"  ({label}: not importable, not measured: {exc}; try --install-peers)")
            continue
        found[label] = fn
    return found


def main() -> None:
    global DEVICE, HIDDEN, BATCH
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--install-peers", action="store_true", help=install_peers.__doc__)
    parser.add_argument("--no-peers", action="store_true", help="measure scramjet only")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--hidden", type=int, default=HIDDEN, help="MLP 784-H-H/2-10")
    parser.add_argument("--batch", type=int, default=BATCH)
    args = parser.parse_args()
    DEVICE, HIDDEN, BATCH = torch.device(args.device), args.hidden, args.batch
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    if args.install_peers:
        install_peers()
    torch.set_num_threads(1)
    data = make_data(args.steps)
    contenders: dict[str, Callable[[TensorDataset], Timing]] = {
        "hand-written loop": run_plain,
        "scramjet Trainer": run_scramjet,
        **({} if args.no_peers else _peers()),
    }
    for fn in contenders.values():  # warm-up: imports, allocator, first-call costs
        fn(data)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(args.reps):
        for name, fn in contenders.items():
            times[name].append(fn(data))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} thread, torch {torch.__version__}, "
        f"python {platform.python_version()}, load average {load:.2f}"
    )
    for module in ("accelerate", "pytorch_accelerated", "lightning"):
        if module in sys.modules:
            print(f"  {module} {getattr(sys.modules[module], '__version__', '?')}")
    if DEVICE.type == "cuda":
        print(f"  device: {torch.cuda.get_device_name(DEVICE)}")
    print(
        f"MLP 784-{HIDDEN}-{HIDDEN // 2}-10 on {DEVICE.type}, batch {BATCH}, {args.steps} steps, "
        f"{args.reps} interleaved reps"
    )
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
