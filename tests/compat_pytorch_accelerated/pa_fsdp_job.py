"""The pytorch-accelerated Trainer's checkpoints with an FSDP2-sharded model, run by
tests/compat_pytorch_accelerated/test_pa_fsdp_checkpoint.py under torchrun.

``python pa_fsdp_job.py MODE OUT`` with MODE:

- ``load``: trains a sharded model (SGD with momentum), ``save_checkpoint``s it, and
  ``load_checkpoint``s the file into another sharded model and optimizer (other initial
  weights). Rank 0 writes ``OUT/result.pt`` with both models' full state dicts and
  predictions.
- ``per_node``: trains and ``save_checkpoint``s (``save_per_node=True``, the default) to
  ``OUT/node{GROUP_RANK}.pt``: one path per node, as two machines without a shared file
  system would have.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated import Trainer
from scramjet.runtime import distributed as dist
from scramjet.runtime import fsdp, shard_model


def data() -> TensorDataset:
    x = torch.randn(32, 6, generator=torch.Generator().manual_seed(1))
    return TensorDataset(x, (x[:, 0] > 0).long())


def make_trainer(seed: int) -> Trainer:
    torch.manual_seed(seed)
    model = shard_model(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[])


def snapshot(trainer: Trainer) -> dict[str, Any]:
    weights, optimizer = fsdp.full_state_dicts(trainer.unwrapped_model, trainer.optimizer)
    predictions = trainer.predict(data(), per_device_batch_size=8)
    return {"weights": weights, "optimizer": optimizer, "predictions": predictions}


def load(out: Path) -> None:
    trained = make_trainer(0)
    trained.train(data(), num_epochs=1, per_device_batch_size=4)
    trained.save_checkpoint(out / "pa.pt")
    loaded = make_trainer(5)
    loaded.load_checkpoint(out / "pa.pt")
    result = {"trained": snapshot(trained), "loaded": snapshot(loaded)}
    if dist.get_rank() == 0:
        torch.save(result, out / "result.pt")


def per_node(out: Path) -> None:
    trainer = make_trainer(0)
    trainer.train(data(), num_epochs=1, per_device_batch_size=4)
    trainer.save_checkpoint(out / f"node{os.environ['GROUP_RANK']}.pt")
    weights, _ = fsdp.full_state_dicts(trainer.unwrapped_model, None)
    if dist.get_rank() == 0:
        torch.save(weights, out / "weights.pt")


def main(mode: str, out: Path) -> None:
    dist.init_distributed()
    if mode == "load":
        load(out)
    else:
        per_node(out)
    dist.destroy_distributed()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
