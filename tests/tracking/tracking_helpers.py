"""Tiny models, data and a headless-Chromium screenshot helper for the tracking tests."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import TensorDataset

from scramjet import Trainer

CHROMIUM = "/usr/bin/chromium"


def tiny_data(n: int = 96, seed: int = 0) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=gen)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return TensorDataset(x, y)


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def make_trainer(
    callbacks: list[Any], seed: int = 0, model: torch.nn.Module | None = None
) -> Trainer:
    model = model or tiny_model(seed)
    return Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.2),
        callbacks=callbacks,
        seed=seed,
    )


def screenshot(html: Path, out: Path, tmp: Path) -> np.ndarray:
    """Render ``html`` in headless Chromium and return the screenshot as an RGB array."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        raise RuntimeError("chromium is required (scripts/system-deps.sh installs it)")
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        f"--screenshot={out}",
        "--window-size=1200,2000",
        html.resolve().as_uri(),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    from PIL import Image

    return np.asarray(Image.open(out).convert("RGB"))


def csv_epoch_values(run: Path, name: str) -> dict[int, float]:
    """The epoch rows of ``metrics.csv`` for ``name``: epoch -> value."""
    with (run / "metrics.csv").open(newline="") as fh:
        return {
            int(r["epoch"]): float(r["value"])
            for r in csv.DictReader(fh)
            if r["scope"] == "epoch" and r["name"] == name
        }


def report_epochs(run: Path) -> list[int]:
    """The epochs of the report's 'Metrics per epoch' table."""
    page = (run / "report.html").read_text()
    table = page.split("Metrics per epoch", 1)[1].split("</table>", 1)[0]
    return [int(e) for e in re.findall(r"<tr><td>(\d+)</td>", table)]
