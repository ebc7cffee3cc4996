"""A Trainer over pack batches and the callbacks the pack-and-Trainer tests share."""

from __future__ import annotations

from typing import Any

import torch

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback


class PackTrainer(Trainer):
    """Trains on a pack's dict batches: flattened images scaled to [0, 1], ``label``."""

    def calculate_train_batch_loss(self, batch: dict[str, Any]) -> dict[str, Any]:
        outputs = self.model(batch["image"].float().div(255).flatten(1))
        loss = self.loss_func(outputs, batch["label"])
        return {"loss": loss, "model_outputs": outputs, "batch_size": len(outputs)}


class Seen(TrainerCallback):
    """Every step's (epoch, sample indices), and every sample's image per epoch."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, list[int]]] = []
        self.images: dict[tuple[int, int], torch.Tensor] = {}

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        batch, epoch = kwargs["batch"], trainer.state.epoch
        self.steps.append((epoch, batch["idx"].tolist()))
        for i, image in zip(batch["idx"].tolist(), batch["image"]):
            self.images[epoch, i] = image.clone()


class CrashAt(TrainerCallback):
    """Raises during optimizer step ``step`` (before its update)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step + 1 == self.step:
            raise RuntimeError("simulated crash")
