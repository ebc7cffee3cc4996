"""Run by test_uneven_streams.py under torchrun: each rank streams a different number of
batches from an IterableDataset without a length (rank 0: 7, rank 1: 4).

Each rank writes ``OUT/rank{r}.json`` with its optimizer steps, its weights and the number
of all-reduces issued from Python during ``train()`` (DDP's gradient buckets are not among
them).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import IterableDataset

import scramjet.trainer._rank_stops as rank_stops
from scramjet import Trainer
from scramjet.runtime import distributed as dist

# The ranks' vote on held stops checks at the first update, at the third, then about every
# CHECK_INTERVAL_S seconds: never again in this run, so the count below is exact.
rank_stops.CHECK_INTERVAL_S = 600.0


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, batches: int) -> None:
        self.batches, self.read = batches, 0

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        g = torch.Generator().manual_seed(dist.get_rank())
        for _ in range(self.batches * 4):
            self.read += 1
            x = torch.randn(4, generator=g)
            yield x, (x.sum() > 0).long()


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    stream = Stream(7 if dist.get_rank() == 0 else 4)
    issued = 0
    all_reduce = torch.distributed.all_reduce

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal issued
        issued += 1
        return all_reduce(*args, **kwargs)

    torch.distributed.all_reduce = counted
    try:
        trainer.train(stream, num_epochs=2, per_device_batch_size=4)
    finally:
        torch.distributed.all_reduce = all_reduce
    weights = [round(float(v), 6) for v in model.weight.detach().flatten()]
    (out / f"rank{dist.get_rank()}.json").write_text(
        json.dumps({"global_step": trainer.state.global_step, "weights": weights, "issued": issued})
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
