"""Run by test_one_rank_stop_rerun.py under torchrun: a stop decided on rank 1 only at the
end of epoch 1; then the same command runs again (a new Trainer, the same checkpoint
folder, ``resume_from="auto"``). ``python one_rank_stop_job.py MODE OUT`` with MODE
``raise`` (a callback raises StopTrainingError) or ``early`` (EarlyStoppingCallback watches
a value each rank logs for itself: it worsens on rank 1 only).

Each rank writes ``OUT/rank{r}.json``: the step each run ended at, whether the weights
changed in the rerun, and the stop reason of each run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import (
    EarlyStoppingCallback,
    SaveTrainingStateCallback,
    StopTrainingError,
    TrainerCallback,
)
from scramjet.runtime import distributed as dist


class StopOnRankOne(TrainerCallback):
    """Stops the run on rank 1 only, at the end of the first epoch (when ``armed``)."""

    def __init__(self, armed: bool) -> None:
        self.armed = armed

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.armed and dist.get_rank() == 1 and trainer.state.epoch == 0:
            raise StopTrainingError("rank 1 stops after epoch 1")


class LogRankValue(TrainerCallback):
    """Logs ``rank_value`` each epoch, without reducing it: it falls on rank 0 and rises on
    rank 1 (from the second epoch)."""

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        sign = 1.0 if dist.get_rank() == 1 else -1.0
        trainer.log("rank_value", sign * trainer.state.epoch)


def make_trainer(mode: str, armed: bool, folder: Path) -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    callbacks: list[TrainerCallback] = [StopOnRankOne(armed and mode == "raise")]
    if mode == "early":
        early = EarlyStoppingCallback(early_stopping_patience=1, watch_metric="rank_value")
        callbacks = [LogRankValue(), early]
    callbacks.append(SaveTrainingStateCallback(folder, async_write=False))
    return Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=callbacks,
    )


def main(mode: str, out: Path) -> None:
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    folder = out / "checkpoints"
    record: dict[str, Any] = {}
    trainer = make_trainer(mode, True, folder)
    trainer.train(data, num_epochs=3, per_device_batch_size=4)
    record["first_step"] = trainer.state.global_step
    record["first_reason"] = str(trainer.stop_reason)
    dist.barrier()
    rerun = make_trainer(mode, False, folder)
    rerun.train(data, num_epochs=3, per_device_batch_size=4, resume_from="auto")
    before, after = trainer.model.state_dict(), rerun.model.state_dict()
    record["rerun_step"] = rerun.state.global_step
    record["rerun_changed"] = any(not torch.equal(before[k], after[k]) for k in before)
    record["rerun_reason"] = str(rerun.stop_reason)
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
