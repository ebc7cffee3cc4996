"""Run by test_dist_trainer.py under torchrun: rank 0's checkpoint write fails.

Every rank calls ``trainer.save_to_manager``; rank 0's manager raises. Each rank writes
``OUT/rank{r}.json`` with what the call did: the error on rank 0, and on rank 1 that the
call returned (it must not be left waiting in the save's barrier for rank 0).
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
from scramjet.checkpoint import CheckpointManager
from scramjet.runtime import distributed as dist


class FullDisk(CheckpointManager):
    def save(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1))
    trainer.train(data, num_epochs=1, per_device_batch_size=4)
    manager = FullDisk(out / "ckpt") if trainer.is_main_process else None
    try:
        trainer.save_to_manager(manager)
        record = {"result": "returned"}
    except OSError as exc:
        record = {"result": f"raised {exc}"}
    dist.barrier()  # the next collective: every rank reaches it
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    dist.destroy_distributed()
