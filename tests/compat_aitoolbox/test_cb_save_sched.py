"""AIToolbox model-save callbacks (the start-of-training cloud check) and LR schedules per step."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from aitb_helpers import MyNeuralModel, loaders
from torch import nn

from scramjet.callbacks.base import CallbackError
from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback
from scramjet.compat.aitoolbox.torchtrain.callbacks.model_save import ModelCheckpoint
from scramjet.compat.aitoolbox.torchtrain.schedulers.warmup import CosineWithWarmupScheduler
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop


def _loop(**kwargs: bool) -> TrainLoop:
    torch.manual_seed(0)
    model = MyNeuralModel()
    train, val, test = loaders()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return TrainLoop(model, train, val, test, opt, nn.CrossEntropyLoss(), **kwargs)


class Steps(AbstractCallback):
    """Counts optimizer steps and records the learning rate each one used."""

    def __init__(self) -> None:
        super().__init__("steps")
        self.lrs: list[float] = []

    def on_batch_begin(self) -> None:
        self.lrs.append(self.train_loop_obj.optimizer.param_groups[0]["lr"])


def test_default_s3_checkpoint_fails_before_the_first_step(s3, tmp_path: Path) -> None:
    steps = Steps()
    callback = ModelCheckpoint("proj", "exp", str(tmp_path), {}, bucket_name="no-such-bucket")
    with pytest.raises(
        CallbackError, match=r"StorageCheckError.*cloud_save_mode='s3'.*cloud_save_mode=None"
    ):
        # lazy: nothing is written at registration, so the start-of-training check speaks
        _loop(lazy_experiment_save=True).fit(num_epochs=1, callbacks=[callback, steps])
    assert steps.lrs == []  # no training step ran


def test_cosine_warmup_learning_rates_follow_the_formula() -> None:
    steps = Steps()
    total, warm = 12, 3  # 6 batches per epoch, 2 epochs
    sched = CosineWithWarmupScheduler(num_warmup_steps=warm, num_training_steps=total)
    _loop().fit(num_epochs=2, callbacks=[sched, steps])

    def expected(step: int) -> float:
        if step < warm:
            return 0.1 * step / warm
        progress = (step - warm) / (total - warm)
        return 0.1 * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    assert steps.lrs == pytest.approx([expected(s) for s in range(total)])
