"""Run by test_mid_epoch_stop.py under torchrun: a stop asked for on rank 1 only, in the
middle of an epoch or outside the epoch-end event. ``python mid_epoch_stop_job.py OUT MODE...``
runs one short training per MODE (a new Trainer each) and writes ``OUT/rank{r}.json``: per
mode, the step and epoch each rank ended at, its stop reason, and a checksum of its weights.

Modes (all on rank 1 only, in the first epoch):

- ``raise_step``: a callback raises ``StopTrainingError`` in ``on_train_step_end`` at batch 5.
- ``raise_update``: the same in ``on_optimizer_step_end`` after update 5.
- ``every_rank``: a callback raises ``StopTrainingError(every_rank=True)`` on both ranks
  after update 5: not held, both stop there.
- ``raise_eval``: a callback raises ``StopTrainingError`` in ``on_eval_step_end``.
- ``stop_epoch_end``: a callback calls ``trainer.stop_training()`` in ``on_train_epoch_end``.
- ``raise_run_start``: a callback raises ``StopTrainingError`` in ``on_training_run_start``.

The process group's timeout is 20 s: a rank left waiting fails the job instead of hanging.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ["SCRAMJET_DIST_TIMEOUT"] = "20"

import torch
from torch import nn
from torch.utils.data import TensorDataset

import scramjet.trainer._rank_stops as rank_stops
from scramjet import Trainer
from scramjet.callbacks import StopTrainingError, TrainerCallback
from scramjet.runtime import distributed as dist

rank_stops.CHECK_INTERVAL_S = 0.05  # about 10 steps of 5 ms between votes
AT = 5  # the batch / update rank 1 asks at


class AskOnRankOne(TrainerCallback):
    """Asks for the stop of ``mode`` on rank 1 only; every step takes about 5 ms."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def _mine(self, trainer: Trainer) -> bool:
        return dist.get_rank() == 1 and trainer.state.epoch == 0

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.mode == "raise_run_start" and dist.get_rank() == 1:
            raise StopTrainingError("rank 1 stops at the start")

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        time.sleep(0.005)
        at = trainer.state.batches_seen_in_epoch + 1 == AT
        if self.mode == "raise_step" and self._mine(trainer) and at:
            raise StopTrainingError("rank 1 stops at batch 5")

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step != AT:
            return
        if self.mode == "every_rank":
            raise StopTrainingError("every rank stops after update 5", every_rank=True)
        if self.mode == "raise_update" and self._mine(trainer):
            raise StopTrainingError("rank 1 stops after update 5")

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.mode == "stop_epoch_end" and self._mine(trainer):
            trainer.stop_training()

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.mode == "raise_eval" and self._mine(trainer):
            raise StopTrainingError("rank 1 stops in evaluation")


def run(mode: str) -> dict[str, Any]:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[AskOnRankOne(mode)],
    )
    data = TensorDataset(torch.randn(512, 4), torch.randint(0, 2, (512,)))
    evaluation = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    # 512 samples, 2 ranks, batch 4: 64 updates per epoch
    trainer.train(data, num_epochs=2, eval_dataset=evaluation, per_device_batch_size=4)
    weights = sum(float(p.detach().double().sum()) for p in trainer.model.parameters())
    return {
        "step": trainer.state.global_step,
        "epochs": trainer.run_history.current_epoch,
        "train_epochs": len(trainer.run_history.get_metric_values("train_loss_epoch")),
        "reason": str(trainer.stop_reason),
        "stop_requested": trainer.state.stop_requested,
        "weights": weights,
    }


def main(out: Path, modes: list[str]) -> None:
    record = {mode: run(mode) for mode in modes}
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
