"""Run by test_scale_to_processes.py under torchrun (2 processes): data that ranks see differently.

``python scale_probe_data_job.py MODE OUT`` with MODE:

- ``stream_predict``: ``trainer.predict`` on an ``IterableDataset`` of 33 samples (every
  rank iterates all of them); each rank writes ``OUT/rank{r}.pt`` with the outputs or the
  error, and the outputs of the same model in one process.
- ``uneven_lengths``: rank 0 trains on 101 samples, rank 1 on 60 (a mistake: e.g. each
  rank loading a different file).
- ``node_local_resume``: checkpoints in ``OUT/node{rank}``, a folder that only this rank
  sees (machines with their own disks); in one process, one epoch is trained and saved
  (``node0``); with two, both resume with ``resume_from="auto"``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import IterableDataset, TensorDataset

from scramjet import Trainer
from scramjet.runtime import distributed as dist


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for i in range(self.n):
            yield torch.linspace(-1, 1, 6) * (i + 1) / self.n, torch.tensor(i % 2)


def make_trainer() -> Trainer:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model, nn.CrossEntropyLoss(), opt, seed=0, callbacks=[])


def stream_predict(out: Path) -> None:
    trainer = make_trainer()
    x = torch.stack([s[0] for s in Stream(33)])
    result: dict[str, Any] = {"expected": trainer.unwrapped_model(x).detach()}
    try:
        result["outputs"] = trainer.predict(Stream(33), per_device_batch_size=4)
    except Exception as error:  # recorded for the test to read
        result["error"] = f"{type(error).__name__}: {error}"
    torch.save(result, out / f"rank{dist.get_rank()}.pt")


def uneven_lengths(out: Path) -> None:
    trainer = make_trainer()
    n = 101 if dist.get_rank() == 0 else 60
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 6, generator=g)
    trainer.train(TensorDataset(x, (x[:, 0] > 0).long()), num_epochs=1, per_device_batch_size=8)
    (out / f"done{dist.get_rank()}").write_text("trained")


def node_local_resume(out: Path) -> None:
    from scramjet.callbacks import SaveTrainingStateCallback

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    folder = out / f"node{dist.get_rank()}"
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        seed=0,
        callbacks=[SaveTrainingStateCallback(folder)],
    )
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 6, generator=g)
    epochs = 1 if dist.get_world_size() == 1 else 2
    data = TensorDataset(x, (x[:, 0] > 0).long())
    trainer.train(data, num_epochs=epochs, per_device_batch_size=8, resume_from="auto")


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    modes = {
        "stream_predict": stream_predict,
        "uneven_lengths": uneven_lengths,
        "node_local_resume": node_local_resume,
    }
    modes[mode](folder)
