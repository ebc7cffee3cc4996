"""An offline stand-in for ``torchvision.datasets.MNIST`` and ``transforms.ToTensor``.

Same shapes and types as the real thing: 28x28 grayscale uint8 images whose ``ToTensor()``
gives 1x28x28 floats in [0, 1], and labels 0-9. Each class is a fixed random stroke
pattern plus pixel noise, so a small MLP learns it. ``SCRAMJET_EXAMPLE_SAMPLES`` sets the
number of samples (60000 by default, the size of MNIST's training set).
"""

from __future__ import annotations

import os
import types
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset


class _ToTensor:
    """uint8 HxW (or HxWxC) array -> float CxHxW tensor in [0, 1], like torchvision's."""

    def __call__(self, image: np.ndarray) -> torch.Tensor:
        array = image[None] if image.ndim == 2 else image.transpose(2, 0, 1)
        return torch.from_numpy(np.ascontiguousarray(array)).float().div_(255)


transforms = types.SimpleNamespace(ToTensor=_ToTensor)


class MNIST(Dataset[tuple[Any, int]]):
    """``MNIST(root, train=True, download=False, transform=None)`` over generated images."""

    def __init__(
        self, root: str, train: bool = True, download: bool = False, transform: Any = None
    ) -> None:
        n = int(os.environ.get("SCRAMJET_EXAMPLE_SAMPLES", "60000" if train else "10000"))
        rng = np.random.default_rng(0 if train else 1)
        patterns = np.random.default_rng(0).random((10, 28, 28)) > 0.5
        self.targets = rng.integers(0, 10, size=n)
        images = rng.random((n, 28, 28), dtype=np.float32) * np.float32(0.3 * 255)
        images += patterns[self.targets] * np.float32(0.7 * 255)
        self.data = images.round().astype(np.uint8)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        image: Any = self.data[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, int(self.targets[index])
