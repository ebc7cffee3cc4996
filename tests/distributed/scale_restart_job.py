"""Run by test_scale_to_processes.py under plain ``torchrun --max-restarts 1``: a Trainer with
``resume_from="auto"`` whose rank 1 kills itself with ``SIGKILL`` once, mid-epoch.

``python scale_probe_restart_job.py OUT``. In the restarted round rank 0 builds its Trainer
a second late, so rank 1 looks up rank 0's address first: it must find the new one, not
the one the killed round left in the launcher's store. Each rank writes
``OUT/rank{r}.pt`` (restart count, the step it resumed at, final step and weights).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.runtime import distributed as dist

KILL_AT_STEP = 5  # rank 1 dies after this optimizer step; checkpoints every 2 steps


class KillOnce(TrainerCallback):
    def __init__(self, out: Path) -> None:
        self.out, self.resumed_at = out, -1

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.resumed_at = trainer.state.global_step

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        marker = self.out / "killed"
        at_kill = dist.get_rank() == 1 and trainer.state.global_step == KILL_AT_STEP
        if at_kill and not marker.exists():
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if restart and os.environ.get("RANK") == "0":
        time.sleep(1.0)  # rank 1 reads rank 0's address before rank 0 publishes it
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 6, generator=g)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    probe = KillOnce(out)
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        seed=0,
        callbacks=[SaveTrainingStateCallback(out / "ckpt", every_n_steps=2), probe],
    )
    trainer.train(data, num_epochs=2, per_device_batch_size=8, resume_from="auto")
    weights = {k: v.clone() for k, v in trainer.unwrapped_model.state_dict().items()}
    result = {
        "restart": restart,
        "resumed_at": probe.resumed_at,
        "step": trainer.state.global_step,
        "weights": weights,
    }
    torch.save(result, out / f"rank{dist.get_rank()}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
