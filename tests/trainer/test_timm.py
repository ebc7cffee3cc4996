"""A timm CNN built from its config (no download) trained with the Trainer's default hooks.

timm imports torchvision at import time, and torchvision has no CPU build that installs
next to the project's CPU torch from the package index (the index's wheel is a CUDA build
whose operator registration fails on CPU torch). So this test runs where a CUDA torch and
its matching torchvision are installed: it is marked ``gpu`` and uses the GPU there.
Install what it needs with ``pip install timm torchvision`` (versions matching torch).

The model tells bright-red images from bright-blue ones: the step loss must fall below half
of its first value, ``predict`` must equal calling the model directly (same rows, in dataset
order) and classify at least 90 % of held-out images correctly.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback

pytestmark = pytest.mark.gpu


def red_or_blue(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(n, 3, 32, 32, generator=g) * 0.5
    labels = torch.arange(n) % 2
    images[labels == 0, 0] += 0.5  # red
    images[labels == 1, 2] += 0.5  # blue
    return TensorDataset(images, labels)


class StepLosses(TrainerCallback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.losses.append(float(kwargs["batch_output"]["loss"].detach()))


def test_timm_resnet_learns_and_predicts_with_the_default_hooks() -> None:
    try:
        import timm
    except ImportError as error:  # pragma: no cover - depends on the machine
        raise AssertionError(
            f"timm is not importable ({error}); install it with `pip install timm torchvision`"
        ) from error
    torch.manual_seed(0)
    model = timm.create_model("resnet10t", pretrained=False, num_classes=2)
    steps = StepLosses()
    trainer = Trainer(
        model,
        loss_func=torch.nn.CrossEntropyLoss(),
        optimizer=torch.optim.AdamW(model.parameters(), lr=3e-3),
        callbacks=[steps],
    )
    trainer.train(red_or_blue(256, seed=0), num_epochs=6, per_device_batch_size=32)
    first, last = sum(steps.losses[:4]) / 4, sum(steps.losses[-4:]) / 4
    assert last < 0.5 * first, steps.losses

    held_out = red_or_blue(64, seed=1)
    predicted = trainer.predict(held_out, per_device_batch_size=16)
    assert isinstance(predicted, torch.Tensor) and predicted.shape == (64, 2)
    net = trainer.unwrapped_model.eval()
    images, labels = held_out.tensors
    with torch.no_grad():
        direct = net(images.to(next(net.parameters()).device)).cpu()
    torch.testing.assert_close(predicted.cpu(), direct, rtol=1e-3, atol=1e-4)
    assert (predicted.cpu().argmax(1) == labels).float().mean() >= 0.9
