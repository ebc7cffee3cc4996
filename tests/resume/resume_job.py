"""A small training job for the resume tests; also runnable as a process that gets killed.

``python resume_job.py CKPT_DIR STEP_FILE DELAY_S`` trains while writing each optimizer
step to STEP_FILE (and sleeping DELAY_S per step, so a parent can kill it mid-run).
Everything is CPU and deterministic, so two runs with the same settings give bitwise
equal weights.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from scramjet import Trainer
from scramjet.callbacks import ModelEmaCallback, SaveTrainingStateCallback, TrainerCallback
from scramjet.schedulers import CosineWarmupScheduler

NUM_SAMPLES, NUM_EVAL, BATCH, ACCUM, EPOCHS = 50, 12, 4, 2, 3
# 50 samples / batch 4 = 13 micro-batches per epoch (the last holds 2 samples), so the
# last accumulation window of an epoch is one micro-batch: 7 updates per epoch, 21 in all.
STEPS_PER_EPOCH = 7
TOTAL_STEPS = EPOCHS * STEPS_PER_EPOCH


class CountingData(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Deterministic samples; records every index it is asked for (in this process)."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x[:, 0] + self.x[:, 1] > 0).long() + (self.x[:, 2] > 1).long()
        self.fetched: list[int] = []

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.fetched.append(int(i))
        return self.x[i], self.y[i]


class DropoutMLP(nn.Module):
    """An MLP with dropout, so the torch RNG state decides the result; counts forwards."""

    def __init__(self) -> None:
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(0)
            self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3))
        self.train_forwards = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.train_forwards += 1
        return self.net(x)


class StepReporter(TrainerCallback):
    """Writes the optimizer step to a file after every update (and optionally sleeps)."""

    def __init__(self, step_file: str | None = None, delay_s: float = 0.0) -> None:
        self.step_file = step_file
        self.delay_s = delay_s

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.step_file is not None:
            tmp = f"{self.step_file}.tmp"
            Path(tmp).write_text(str(trainer.state.global_step))
            os.replace(tmp, self.step_file)
        if self.delay_s:
            time.sleep(self.delay_s)


def build(
    ckpt_dir: str | os.PathLike[str] | None,
    *,
    every_n_steps: int | None = 3,
    every_n_epochs: int | None = 1,
    num_workers: int = 2,
    extra: tuple[TrainerCallback, ...] = (),
    precision: str = "no",
) -> tuple[Trainer, dict[str, Any]]:
    """A Trainer (AdamW, cosine warmup, accumulation 2, EMA, dropout) and its train() kwargs."""
    model = DropoutMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
    callbacks: list[TrainerCallback] = [ModelEmaCallback(decay=0.8)]
    if ckpt_dir is not None:
        callbacks.append(
            SaveTrainingStateCallback(
                ckpt_dir, every_n_steps=every_n_steps, every_n_epochs=every_n_epochs, keep_last=2
            )
        )
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        opt,
        callbacks=[*callbacks, *extra],
        precision=precision,
        seed=7,
    )
    kwargs: dict[str, Any] = dict(
        train_dataset=CountingData(NUM_SAMPLES, seed=1),
        num_epochs=EPOCHS,
        eval_dataset=CountingData(NUM_EVAL, seed=2),
        per_device_batch_size=BATCH,
        gradient_accumulation_steps=ACCUM,
        create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1),
        train_dataloader_kwargs={"num_workers": num_workers},
    )
    return trainer, kwargs


def ema_weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    """The EMA copy's weights."""
    ema = trainer.callback_handler.get(ModelEmaCallback)
    assert isinstance(ema, ModelEmaCallback) and ema.ema_model is not None
    return ema.ema_model.state_dict()


def main(argv: list[str]) -> None:
    """Train with checkpoints every 3 steps, reporting steps to a file."""
    torch.set_num_threads(1)
    ckpt_dir, step_file, delay = argv[0], argv[1], float(argv[2])
    trainer, kwargs = build(ckpt_dir, extra=(StepReporter(step_file, delay),))
    trainer.train(**kwargs)


if __name__ == "__main__":
    main(sys.argv[1:])
