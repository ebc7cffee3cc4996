"""Run by test_slow_data_stop.py under torchrun (2 processes, gloo): a data-bound training
whose first steps are fast and whose later steps are slow, stopped in the middle.

``python slow_data_stop_job.py OUT MODE``. The Trainer's loader has 2 workers; each worker
hands out its first ``FAST_ITEMS`` samples at once, then sleeps ``SLOW_S`` per sample, so
after the first few steps a step waits about 0.1 s for its batch. Each rank writes its
optimizer step to ``OUT/step{rank}`` as it goes, and ``OUT/rank{rank}.json`` at the end:
the step it stopped at and when (``time.time()``), its stop reason, and the exception that
ended ``train()`` (if any) with its exit code.

Modes:

- ``signal``: ``SaveTrainingStateCallback(OUT/ckpt)``; the test sends ``SIGTERM`` to the
  launcher, which forwards it to both ranks.
- ``one_rank_stop``: rank 1's callback raises ``StopTrainingError`` after update
  ``STOP_AT`` (rank 1 only: the ranks vote on it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, StopTrainingError, TrainerCallback
from scramjet.runtime import distributed as dist

FAST_ITEMS = 8  # per loader worker: its first two batches of 4 come at once
SLOW_S = 0.05  # then each sample takes this long: 2 workers, 4 samples, about 0.1 s a step
SAMPLES = 4000  # 500 updates per rank: far more than the test waits for
STOP_AT = 15  # one_rank_stop: rank 1 raises after this update


class SlowAfterAFew(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Fast for the first ``FAST_ITEMS`` samples each worker loads, then data-bound."""

    def __init__(self) -> None:
        self.loaded = 0  # per worker process (each worker has its own copy)

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.loaded += 1
        if self.loaded > FAST_ITEMS:
            time.sleep(SLOW_S)
        return torch.full((4,), float(i % 7)), torch.tensor(i % 2)


class Steps(TrainerCallback):
    """Writes this rank's step as it goes; rank 1 raises its own stop in one_rank_stop."""

    def __init__(self, out: Path, mode: str) -> None:
        self.out, self.mode = out, mode

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        rank, step = dist.get_rank(), trainer.state.global_step
        (self.out / f"step{rank}.tmp").write_text(f"{step} {time.time()}")
        os.replace(self.out / f"step{rank}.tmp", self.out / f"step{rank}")
        if self.mode == "one_rank_stop" and rank == 1 and step == STOP_AT:
            raise StopTrainingError(f"rank 1 stops after update {STOP_AT}")


def main(out: Path, mode: str) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    callbacks: list[TrainerCallback] = [Steps(out, mode)]
    if mode == "signal":
        callbacks.append(SaveTrainingStateCallback(out / "ckpt", every_n_epochs=None))
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks
    )
    record: dict[str, Any] = {"error": None, "code": 0}
    try:
        trainer.train(
            SlowAfterAFew(),
            num_epochs=1,
            per_device_batch_size=4,
            train_dataloader_kwargs={"num_workers": 2},
        )
    except SystemExit as stop:  # TrainingPreempted
        record["error"], record["code"] = type(stop).__name__, stop.code
        raise
    finally:
        record["step"], record["time"] = trainer.state.global_step, time.time()
        record["reason"] = None if trainer.stop_reason is None else str(trainer.stop_reason)
        (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
