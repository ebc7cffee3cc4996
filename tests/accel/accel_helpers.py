"""Tiny models and datasets for the accel tests (importable by spawned workers)."""

from __future__ import annotations

import os
import random
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from scramjet.accel import accelerate_dataset, accelerate_model


class SmallNet(nn.Module):
    """Linear -> BatchNorm -> ReLU -> Dropout -> Linear head."""

    def __init__(self, d_in: int = 8, hidden: int = 16, d_out: int = 3) -> None:
        super().__init__()
        self.fc = nn.Linear(d_in, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(torch.relu(self.bn(self.fc(x)))))


@accelerate_model(backends=["PYTORCH"])
class DecoratedNet(SmallNet):
    """SmallNet, decorated at module level so pickling finds it by name."""


class LoggingDataset(Dataset):
    """Returns nested, mixed-type samples and logs every decode to a file (one line each)."""

    def __init__(self, n: int, log_path: str, size: int = 16) -> None:
        self.n, self.log_path, self.size = n, log_path, size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        with open(self.log_path, "a") as f:
            f.write(f"{os.getpid()} {i}\n")
        g = torch.Generator().manual_seed(i)
        return {
            "x": torch.randn(self.size, generator=g),
            "arr": np.full((2, 2), i, dtype=np.int32),
            "meta": (i, f"item-{i}", [float(i), {"half": torch.tensor(i, dtype=torch.bfloat16)}]),
        }


class SlowLoggingDataset(LoggingDataset):
    """LoggingDataset whose decode takes ``delay`` seconds (a stand-in for JPEG decoding)."""

    def __init__(self, n: int, log_path: str, delay: float = 0.004) -> None:
        super().__init__(n, log_path)
        self.delay = delay

    def __getitem__(self, i: int) -> dict:
        time.sleep(self.delay)
        return super().__getitem__(i)


@accelerate_dataset(max_memory_size=1 << 20)
class DecoratedDataset(LoggingDataset):
    """LoggingDataset with caching, decorated at module level."""


class RandomDataset(Dataset):
    """A dataset whose __getitem__ is random (a frozen-augmentation hazard)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> float:
        return random.random()


def add_noise(sample: dict) -> dict:
    """A random augmentation to pass as transform= (module level: picklable)."""
    return {**sample, "x": sample["x"] + torch.randn_like(sample["x"])}


def read_log_pids(path: str) -> list[tuple[int, int]]:
    """(pid, index) of every decode so far, in log order."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [(int(a), int(b)) for a, b in (line.split() for line in f if line.strip())]


def read_log(path: str) -> list[int]:
    """Indices decoded so far, in log order."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(line.split()[1]) for line in f if line.strip()]


def run_model(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Forward in another process (spawn pickles the model by class name)."""
    with torch.no_grad():
        return model(x)
