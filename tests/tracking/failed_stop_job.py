"""Run by test_failed_stop_status.py under torchrun: ``python failed_stop_job.py MODE OUT``.

MODE ``nan``: the loss is NaN at the same batch on every rank (TerminateOnNaNCallback stops
every rank, and train() raises TrainingNaNError on each). MODE ``one-rank``: a callback on
rank 1 only raises ``StopTrainingError(reraise=True)``; the ranks agree on the stop, and
only rank 1's train() raises it. Each rank writes ``OUT/rank{r}.json``: what train()
raised, the step it ended at and the run folder.
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
from scramjet.callbacks import StopTrainingError, TerminateOnNaNCallback, TrainerCallback
from scramjet.runtime import distributed as dist
from scramjet.tracking import Experiment

NAN_AT = 6  # the 6th batch of each rank: 5 updates before the stop


class NaNLoss:
    def __init__(self, armed: bool) -> None:
        self.armed, self.calls = armed, 0

    def __call__(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        loss = nn.functional.cross_entropy(outputs, targets)
        return loss * float("nan") if self.armed and self.calls == NAN_AT else loss


class RankOneGivesUp(TrainerCallback):
    def __init__(self, armed: bool) -> None:
        self.armed = armed

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if self.armed and dist.get_rank() == 1 and trainer.state.global_step == 3:
            raise StopTrainingError("rank 1 gave up", reraise=True)


def main(mode: str, out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    exp = Experiment("p", "e", root=out / "runs")
    trainer = Trainer(
        model,
        NaNLoss(mode == "nan"),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[TerminateOnNaNCallback(), RankOneGivesUp(mode == "one-rank"), exp],
        seed=0,
    )
    raised = None
    try:
        trainer.train(data, num_epochs=2, per_device_batch_size=4)
    except StopTrainingError as error:
        raised = type(error).__name__
    record = {"raised": raised, "step": trainer.state.global_step, "run_dir": str(exp.run_dir)}
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
