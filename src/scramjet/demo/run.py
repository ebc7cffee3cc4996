"""``scramjet demo``: the whole product working on this machine, with no download.

1. generates a labelled synthetic image set as loose JPEG files plus a CSV list;
2. packs it into sharded HDF5 (:func:`scramjet.data.pack`);
3. trains a small CNN with the :class:`~scramjet.Trainer` over the pack, through
   ``CachedDataset`` (decoded once, shared by workers) and ``accelerate_model``, with the
   terminal :class:`~scramjet.dashboard.Dashboard` and :class:`~scramjet.tracking.Experiment`
   tracking (checkpoints, metrics, plots, ``report.html``);
4. evaluates on held-out images with a classification result package;
5. measures a plain PyTorch loop over the loose files in the same run and prints both
   throughputs.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from scramjet.callbacks import TrainerCallback
from scramjet.trainer import Trainer

BATCH_SIZE = 64


#: The fewest training images (one batch) and epochs the demo runs with.
MIN_SAMPLES, MIN_EPOCHS = BATCH_SIZE, 1


def _whole_number(least: int) -> Any:
    """An argparse ``type`` accepting whole numbers ``>= least``; anything else is a usage
    error that names the option, the value received and what is expected."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(
                f"expected a whole number >= {least}, received {text!r}"
            )
        return value

    parse.__name__ = f"whole number >= {least}"
    return parse


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Options of ``scramjet demo``."""
    parser.add_argument(
        "--epochs", type=_whole_number(MIN_EPOCHS), default=3, help="training epochs (default 3)"
    )
    parser.add_argument(
        "--out",
        default="scramjet-demo",
        help="output folder, created if missing (default ./scramjet-demo)",
    )
    parser.add_argument(
        "--samples",
        type=_whole_number(MIN_SAMPLES),
        default=2048,
        help=f"training images, at least {MIN_SAMPLES} (default 2048)",
    )
    parser.add_argument("--no-dashboard", action="store_true", help="plain progress lines only")
    parser.add_argument(
        "--seed", type=_whole_number(0), default=0, help="seed of data and training (default 0)"
    )


class ImageTrainer(Trainer):
    """Batches from a pack are dicts of uint8 NHWC images: scale them on the device."""

    @staticmethod
    def to_input(images: torch.Tensor) -> torch.Tensor:
        """uint8 N×H×W×C → float N×C×H×W in [0, 1]."""
        return images.permute(0, 3, 1, 2).float().div_(255.0)

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        """Loss of one batch of ``{"image", "label"}``."""
        outputs = self.model(self.to_input(batch["image"]))
        loss_func = self.loss_func
        if loss_func is None:
            raise TypeError("ImageTrainer needs a loss_func")
        loss = loss_func(outputs, batch["label"])
        return {"loss": loss, "model_outputs": outputs, "batch_size": batch["label"].size(0)}

    calculate_eval_batch_loss = calculate_train_batch_loss

    def predict_step(self, batch: Any) -> Any:
        """Logits of one batch."""
        return self.model(self.to_input(batch["image"]))


class EpochTimer(TrainerCallback):
    """Samples/s of each training epoch (no per-step work)."""

    def __init__(self) -> None:
        self.rates: list[float] = []
        self._t0, self._s0 = 0.0, 0

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start the clock."""
        self._t0, self._s0 = time.perf_counter(), trainer.state.samples_seen

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Record the epoch's rate."""
        elapsed = time.perf_counter() - self._t0
        self.rates.append((trainer.state.samples_seen - self._s0) / elapsed)


def write_image_folder(folder: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    """Loose JPEG files plus ``list.csv`` (``image,label``) — the layout users start from."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (img, label) in enumerate(zip(images, labels)):
        name = f"img_{i:05d}.jpg"
        Image.fromarray(img).save(folder / name, quality=95)
        rows.append((name, int(label)))
    csv_path = folder / "list.csv"
    with open(csv_path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["image", "label"])
        writer.writerows(rows)
    return csv_path


class LooseFiles(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """What a plain PyTorch user writes: open and decode one file per item."""

    def __init__(self, folder: Path) -> None:
        with open(folder / "list.csv", newline="") as fh:
            self.rows = [(folder / r["image"], int(r["label"])) for r in csv.DictReader(fh)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        path, label = self.rows[i]
        with Image.open(path) as img:
            arr = np.array(img.convert("RGB"))
        return torch.from_numpy(arr).permute(2, 0, 1).float().div_(255.0), label


def plain_epoch_rate(folder: Path, seed: int) -> float:
    """Samples/s of one epoch of a hand-written loop over the loose files (fresh model)."""
    from scramjet.demo.data import SmallCNN

    torch.manual_seed(seed)
    model = SmallCNN()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_func = nn.CrossEntropyLoss()
    loader = torch.utils.data.DataLoader(LooseFiles(folder), batch_size=BATCH_SIZE, shuffle=True)
    model.train()
    start, seen = time.perf_counter(), 0
    for xb, yb in loader:
        loss = loss_func(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        seen += yb.size(0)
    return seen / (time.perf_counter() - start)


def scramjet_epoch_rate(train_ds: Any, seed: int) -> float:
    """Samples/s of one Trainer epoch over the (already cached) pack (fresh model)."""
    from scramjet.accel import accelerate_model
    from scramjet.callbacks import MoveModulesToDeviceCallback, TerminateOnNaNCallback
    from scramjet.demo.data import SmallCNN

    torch.manual_seed(seed)
    model = accelerate_model(SmallCNN())
    timer = EpochTimer()
    callbacks = [MoveModulesToDeviceCallback(), TerminateOnNaNCallback(), timer]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    trainer = ImageTrainer(model, nn.CrossEntropyLoss(), opt, callbacks=callbacks)
    trainer.train(train_ds, num_epochs=1, per_device_batch_size=BATCH_SIZE)
    return timer.rates[-1]


def compare_throughput(
    train_ds: Any, folder: Path, seed: int, reps: int = 2
) -> tuple[float, float]:
    """Median samples/s of scramjet and of a plain loop, epochs interleaved in this run."""
    ours, plain = [], []
    for _ in range(reps):
        plain.append(plain_epoch_rate(folder, seed))
        ours.append(scramjet_epoch_rate(train_ds, seed))
    return statistics.median(ours), statistics.median(plain)


def _prepare_data(args: argparse.Namespace, out: Path) -> tuple[Path, Path, Path, Path]:
    from scramjet.data import pack
    from scramjet.demo.data import make_images

    n_test = max(64, args.samples // 4)
    print(f"[1/5] generating {args.samples} + {n_test} labelled 32x32 images as JPEG files")
    train_dir, test_dir = out / "images" / "train", out / "images" / "test"
    write_image_folder(train_dir, *make_images(args.samples, seed=args.seed))
    write_image_folder(test_dir, *make_images(n_test, seed=args.seed + 1))
    print("[2/5] packing them into sharded HDF5 (scramjet.data.pack)")
    packs = []
    for name, folder in (("train", train_dir), ("test", test_dir)):
        dst = out / f"{name}.pack"
        pack(
            folder,
            folder / "list.csv",
            dst,
            dtype=["int64"],
            height=32,
            width=32,
            encode="jpeg",
            shards=2,
            overwrite=True,
            progress=False,
        )
        packs.append(dst)
    return train_dir, test_dir, packs[0], packs[1]


def _callbacks(
    args: argparse.Namespace, out: Path, experiment: Any, timer: EpochTimer
) -> list[Any]:
    from scramjet.callbacks import MoveModulesToDeviceCallback, TerminateOnNaNCallback

    callbacks: list[Any] = [
        MoveModulesToDeviceCallback(),
        TerminateOnNaNCallback(),
        timer,
        experiment,
    ]
    if args.no_dashboard:
        from scramjet.callbacks import LogMetricsCallback, ProgressBarCallback

        callbacks += [ProgressBarCallback(), LogMetricsCallback()]
    else:
        from scramjet.dashboard import Dashboard

        callbacks.append(Dashboard(log_path=str(out / "aerolog"), window=5, span=60))
    return callbacks


def training_banner(dashboard: bool) -> str:
    """The line that announces step 3, naming the parts it uses."""
    parts = ["Trainer", "CachedDataset", "accelerate_model", "Experiment"]
    parts.insert(3, "Dashboard" if dashboard else "progress lines")
    return "[3/5] training a small CNN: " + " + ".join(parts)


def _train(
    args: argparse.Namespace, out: Path, train_pack: Path, test_pack: Path
) -> tuple[Any, ...]:
    """Step 3: the Trainer over cached packs, with the dashboard and tracking."""
    from scramjet.accel import CachedDataset, accelerate_model
    from scramjet.data import PackedDataset
    from scramjet.demo.data import SmallCNN
    from scramjet.runtime.seeding import seed_everything
    from scramjet.tracking import Experiment

    print(training_banner(dashboard=not args.no_dashboard))
    train_ds = CachedDataset(PackedDataset(train_pack), preloaded_data=2)
    test_ds = CachedDataset(PackedDataset(test_pack))
    seed_everything(args.seed)  # before the model exists, so its initial weights are seeded too
    model = accelerate_model(SmallCNN())
    hyperparams = {"model": "SmallCNN", "optimizer": "AdamW", "lr": 3e-3, "batch_size": BATCH_SIZE,
                   "epochs": args.epochs, "samples": args.samples, "seed": args.seed}  # fmt: skip
    experiment = Experiment(
        "scramjet-demo", "small-cnn", root=out / "runs", hyperparams=hyperparams
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    callbacks = _callbacks(args, out, experiment, EpochTimer())
    trainer = ImageTrainer(
        model, nn.CrossEntropyLoss(), optimizer, callbacks=callbacks, seed=args.seed
    )
    trainer.train(train_ds, num_epochs=args.epochs, eval_dataset=test_ds,
                  per_device_batch_size=BATCH_SIZE)  # fmt: skip
    return trainer, experiment, train_ds, test_ds


def _check_options(args: argparse.Namespace) -> str | None:
    """What is wrong with the options (``None`` when nothing is); creates ``--out``."""
    for option, least in (("epochs", MIN_EPOCHS), ("samples", MIN_SAMPLES), ("seed", 0)):
        value = getattr(args, option)
        if not isinstance(value, int) or value < least:
            return f"--{option} must be a whole number >= {least}; received {value!r}"
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = "it is a file" if out.is_file() else (error.strerror or str(error))
        return (
            f"--out {str(out)!r} cannot be used as the output folder ({reason}); "
            "pass --out a folder that can be created or written"
        )
    if not os.access(out, os.W_OK | os.X_OK):
        return f"--out {str(out)!r} is not writable; pass --out a folder you can write to"
    return None


def run(args: argparse.Namespace) -> int:
    """Run the demo; returns a process exit code."""
    problem = _check_options(args)  # before the slow imports below
    if problem:
        print(f"scramjet demo: error: {problem}", file=sys.stderr)
        return 2
    from scramjet.demo.data import CLASSES
    from scramjet.metrics import ClassificationResults

    out = Path(args.out)
    t_start = time.perf_counter()
    train_dir, _, train_pack, test_pack = _prepare_data(args, out)
    trainer, experiment, train_ds, test_ds = _train(args, out, train_pack, test_pack)

    print("[4/5] evaluating on held-out images")
    targets = torch.tensor([int(test_ds[i]["label"]) for i in range(len(test_ds))])
    logits = trainer.predict(test_ds, per_device_batch_size=256)
    results = ClassificationResults(num_classes=len(CLASSES)).compute(logits, targets)
    experiment.log_results("test", results)

    print("[5/5] timing epochs of scramjet and of a plain PyTorch loop over the loose JPEG files")
    ours, plain = compare_throughput(train_ds, train_dir, args.seed)
    print(f"\ntest accuracy: {results['accuracy']:.1%} on {len(test_ds)} held-out images "
          f"(macro F1 {results['f1_macro']:.3f})")  # fmt: skip
    print(f"throughput: scramjet {ours:,.0f} samples/s vs plain PyTorch loop {plain:,.0f} "
          f"samples/s -> {ours / plain:.2f}x (same model, median of 2 interleaved epochs each, "
          "this run)")  # fmt: skip
    print(f"run folder: {experiment.run_dir}")
    print(f"report:     {experiment.run_dir / 'report.html'}")
    print(f"finished in {time.perf_counter() - t_start:.0f} s")
    return 0
