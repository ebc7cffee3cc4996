"""nebulgym's README model and dataset: plain PyTorch vs scramjet vs nebulgym 0.1.1.

224x224 PNG files, batch 8, Adam(lr=1e-4), the same torch thread count for every contender.
Prints samples/s per epoch and final validation accuracy. nebulgym 0.1.1 is installed from
PyPI into .bench/nebulgym-venv (it sees this project's torch through a .pth file) and run in
a subprocess; if that fails, the reason is printed and the other figures still stand.

    .venv/bin/python benchmarks/accel_seed.py [--images 512] [--epochs 4]
    .venv/bin/python benchmarks/accel_seed.py --long     # 2048 images, 6 epochs
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accel_common import BENCH_DIR, label_of, machine, make_images, ratio_row

NEBULGYM_VENV = os.path.join(BENCH_DIR, "nebulgym-venv")


def model_class() -> type[torch.nn.Module]:
    """A fresh copy of the README model class (nebulgym rewrites classes in place)."""

    class CustomModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._avg_pool = torch.nn.AvgPool2d(4)
            self._linear = torch.nn.Linear(3136, 1024)
            self._relu = torch.nn.ReLU()
            self._linears = torch.nn.Sequential(*_readme_linears())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self._avg_pool(x).mean(dim=-3).view(-1, 3136)
            x = self._relu(self._linear(x))
            return self._linears(x)

    return CustomModel


def _readme_linears() -> list[torch.nn.Module]:
    nn = torch.nn
    return [
        nn.BatchNorm1d(1024), nn.Linear(1024, 2048), nn.ReLU(),
        nn.BatchNorm1d(2048), nn.Linear(2048, 1024), nn.ReLU(),
        nn.BatchNorm1d(1024), nn.Linear(1024, 512), nn.ReLU(),
        nn.BatchNorm1d(512), nn.Linear(512, 256), nn.ReLU(),
        nn.Linear(256, 2),
    ]  # fmt: skip


def read_image(path: str) -> torch.Tensor:
    with Image.open(path) as img:
        arr = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(arr).permute(2, 0, 1).contiguous()


def dataset_class() -> type[Dataset]:
    """A fresh copy of the README dataset class."""

    class CustomDataset(Dataset):
        def __init__(self, img_paths: list[str], labelling_func: Callable, reading_func: Callable):
            self._images = img_paths
            self._labelling_func = labelling_func
            self._reading_func = reading_func

        def __getitem__(self, item: int) -> tuple[torch.Tensor, int]:
            img_path = self._images[item]
            return self._reading_func(img_path), self._labelling_func(img_path)

        def __len__(self) -> int:
            return len(self._images)

    return CustomDataset


def train(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    train_ds: Dataset,
    val_ds: Dataset,
    epochs: int,
) -> dict[str, Any]:
    loader = DataLoader(train_ds, batch_size=8, shuffle=True, drop_last=True)
    rates = []
    for _ in range(epochs):
        model.train()
        start, n = time.perf_counter(), 0
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            n += len(y)
        rates.append(n / (time.perf_counter() - start))
    model.eval()
    hits = total = 0
    with torch.no_grad():
        for x, y in DataLoader(val_ds, batch_size=8):
            hits += int((model(x).argmax(1) == y).sum())
            total += len(y)
    return {"rates": rates, "val_acc": hits / total}


def contender(name: str, paths: list[str], val_paths: list[str], epochs: int) -> dict:
    torch.manual_seed(0)
    model_cls, data_cls = model_class(), dataset_class()
    make_opt: Callable[..., torch.optim.Optimizer] = torch.optim.Adam
    if name.startswith("scramjet"):
        from scramjet.accel import accelerate_dataset, accelerate_model, fast_optimizer

        data_cls = accelerate_dataset(preloaded_data=2)(data_cls)
        model_cls = accelerate_model(patch_backprop="sparse" in name)(model_cls)
        make_opt = lambda params, lr: fast_optimizer(torch.optim.Adam(params, lr=lr))  # noqa: E731
    elif name.startswith("nebulgym"):
        from nebulgym.decorators.torch_decorators import accelerate_dataset, accelerate_model

        data_cls = accelerate_dataset(preloaded_data=20, max_memory_size=None)(data_cls)
        kwargs = {"patch_backprop": False} if "dense" in name else {}
        model_cls = accelerate_model(**kwargs)(model_cls)
    model = model_cls()
    optimizer = make_opt(model.parameters(), lr=1e-4)
    train_ds = data_cls(paths, label_of, read_image)
    val_ds = data_cls(val_paths, label_of, read_image)
    return train(model, optimizer, train_ds, val_ds, epochs)


def nebulgym_python() -> tuple[str | None, str]:
    py = os.path.join(NEBULGYM_VENV, "bin", "python")
    if os.path.exists(py):
        return py, "reused"
    try:
        subprocess.run([sys.executable, "-m", "venv", NEBULGYM_VENV], check=True)
        site = subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        here = subprocess.run(
            [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        with open(os.path.join(site, "zz_project_torch.pth"), "w") as f:
            f.write(here + "\n")
        subprocess.run([py, "-m", "pip", "install", "-q", "nebulgym==0.1.1"], check=True)
    except (subprocess.CalledProcessError, OSError) as exc:
        return None, f"could not install nebulgym 0.1.1: {exc}"
    return py, "installed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--long", action="store_true", help="2048 images, 6 epochs")
    parser.add_argument("--only", help=argparse.SUPPRESS)  # run one contender, print JSON
    args = parser.parse_args()
    if args.long:
        args.images, args.epochs = 2048, 6
    torch.set_num_threads(args.threads)
    folder = os.path.join(BENCH_DIR, "png224")
    paths = make_images(folder, args.images + 128, 224, "png")
    train_paths, val_paths = paths[: args.images], paths[args.images :]
    if args.only:
        print(json.dumps(contender(args.only, train_paths, val_paths, args.epochs)))
        return
    print(machine())
    print(f"{args.images} train / 128 val PNGs 224x224, batch 8, {args.epochs} epochs")
    results = {}
    for name in ("plain PyTorch", "scramjet (safe defaults)", "scramjet + patch_backprop"):
        results[name] = contender(name, train_paths, val_paths, args.epochs)
    py, how = nebulgym_python()
    for name in ("nebulgym defaults", "nebulgym patch_backprop=False"):
        if py is None:
            print(f"{name}: not measured ({how})")
            continue
        cmd = [py, os.path.abspath(__file__), "--only", name, "--images", str(args.images),
               "--epochs", str(args.epochs), "--threads", str(args.threads)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{name}: failed ({proc.stderr.strip().splitlines()[-1:]})")
            continue
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    base = results["plain PyTorch"]["rates"]
    print(f"{'contender':<34} samples/s by epoch")
    for name, res in results.items():
        print(ratio_row(name, res["rates"], base, f"  val acc {100 * res['val_acc']:.1f}%"))


if __name__ == "__main__":
    main()
