"""A labelled synthetic image world for the demo, examples and tests (no downloads).

Four classes drawn with random colours, positions, sizes and noise: horizontal
stripes, vertical stripes, a filled disc, a hollow square. Easy for a small CNN, but
not trivially separable by mean colour.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

CLASSES = ("hstripes", "vstripes", "disc", "square")


def make_image(label: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """One ``size``×``size`` RGB uint8 image of class ``label``."""
    bg = rng.integers(0, 256, 3)
    fg = (bg + rng.integers(80, 176, 3)) % 256
    img = np.empty((size, size, 3), dtype=np.float32)
    img[:] = bg
    yy, xx = np.mgrid[0:size, 0:size]
    if label == 0 or label == 1:
        period = int(rng.integers(3, 7))
        phase = int(rng.integers(0, period))
        coord = yy if label == 0 else xx
        mask = ((coord + phase) // max(1, period // 2)) % 2 == 0
    else:
        r = rng.uniform(0.2, 0.35) * size
        cy, cx = rng.uniform(r, size - r, 2)
        if label == 2:
            mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r**2
        else:
            inside = (np.abs(yy - cy) <= r) & (np.abs(xx - cx) <= r)
            inner = (np.abs(yy - cy) <= r - 2) & (np.abs(xx - cx) <= r - 2)
            mask = inside & ~inner
    img[mask] = fg
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def make_images(n: int, size: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images (N, H, W, 3) uint8 with balanced labels (N,) int64."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % len(CLASSES)
    rng.shuffle(labels)
    images = np.stack([make_image(int(lab), size, rng) for lab in labels])
    return images, labels.astype(np.int64)


def to_tensor_dataset(images: np.ndarray, labels: np.ndarray) -> torch.utils.data.TensorDataset:
    """CHW float tensors in [0, 1] and int64 labels."""
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255.0)
    return torch.utils.data.TensorDataset(x, torch.from_numpy(labels))


class SmallCNN(nn.Module):
    """A small convolutional classifier for 32×32 RGB images."""

    def __init__(self, num_classes: int = len(CLASSES)) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for a batch of images (N, 3, H, W)."""
        logits: torch.Tensor = self.head(torch.flatten(self.features(x), 1))
        return logits
