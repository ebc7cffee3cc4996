"""BatchNorm running statistics across ranks, run by tests/distributed/test_bn_sync.py
under torchrun (2 processes).

``python bn_sync_job.py OUT CASE...`` with CASE:

- ``limit``: DDP, accumulation 2, ``LimitBatchesCallback(3)``: the epoch ends inside a
  window (its last micro-step runs under ``no_sync``);
- ``stream``: DDP, accumulation 2, an ``IterableDataset`` of 3 batches per rank (length
  unknown): the epoch ends inside a window too;
- ``fsdp``: the model sharded with ``shard_model``, accumulation 2, complete windows;
- ``fsdp_limit``: sharded, and the epoch ends inside a window as in ``limit``.

For each case every rank writes ``OUT/CASE/rank{r}.pt`` with its buffers after training,
its predictions and evaluation loss; rank 0's checkpoint is ``OUT/CASE/final.pt``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import IterableDataset, TensorDataset

from scramjet import Trainer
from scramjet.callbacks import LimitBatchesCallback
from scramjet.runtime import distributed as dist
from scramjet.runtime import shard_model


def tensors(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(seed))
    x = x * (1 + torch.arange(n).float()[:, None] / 4)  # ranks see batches of other scales
    return x, (x[:, 0] + x[:, 1] > 0).long()


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """6 samples per rank, each rank its own: 3 batches of 2 (no length)."""

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        x, y = tensors(12, 1)
        for i in range(dist.get_rank(), 12, dist.get_world_size()):
            yield x[i], y[i]


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 2))


def run(case: str, out: Path) -> None:
    model = shard_model(make_model()) if case.startswith("fsdp") else make_model()
    callbacks = [LimitBatchesCallback(3)] if case.endswith("limit") else []
    data = Stream() if case == "stream" else TensorDataset(*tensors(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=callbacks, seed=0)
    trainer.train(data, num_epochs=1, per_device_batch_size=2, gradient_accumulation_steps=2)
    buffers = {k: v.clone() for k, v in trainer.unwrapped_model.named_buffers()}
    eval_data = TensorDataset(*tensors(12, 2))
    predictions = trainer.predict(eval_data, per_device_batch_size=3)
    trainer.evaluate(eval_data, per_device_batch_size=3)
    folder = out / case
    folder.mkdir(parents=True, exist_ok=True)
    trainer.save_checkpoint(folder / "final.pt")
    record = {
        "buffers": buffers,
        "predictions": predictions,
        "eval_loss": trainer.run_history.get_latest_metric("eval_loss_epoch"),
        "steps": trainer.state.global_step,
    }
    torch.save(record, folder / f"rank{dist.get_rank()}.pt")


def main(out: Path, cases: list[str]) -> None:
    dist.init_distributed()
    for case in cases:
        run(case, out)
    dist.destroy_distributed()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
