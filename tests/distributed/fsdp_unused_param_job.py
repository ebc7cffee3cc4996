"""FSDP2 job with a parameter the optimizer holds no state for at the checkpoint, run by
tests/distributed/test_fsdp_unused_param.py under torchrun (2 processes).

``python fsdp_unused_param_job.py OUT``: trains a model whose ``aux`` head the loss uses
only from the second epoch on (AdamW keeps no state for it before), checkpointing every 2
updates; then trains again resumed from the first checkpoint (inside the first epoch,
where ``aux`` has no state), and tries that checkpoint with optimizers of other groups.
Rank 0 writes ``OUT/result.pt`` with both runs' full state dicts and the refusals.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.runtime import distributed as dist
from scramjet.runtime import fsdp, shard_model


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
        self.head = nn.Linear(8, 2)
        self.aux = nn.Linear(8, 2)  # used from the second epoch on
        self.use_aux = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        return self.head(h) + self.aux(h) if self.use_aux else self.head(h)


class AuxFromSecondEpoch(TrainerCallback):
    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        trainer.unwrapped_model.use_aux = trainer.state.epoch >= 1


def data() -> TensorDataset:
    x = torch.randn(32, 6, generator=torch.Generator().manual_seed(1))
    return TensorDataset(x, (x[:, 0] > 0).long())


def run(ckpt_dir: Path, resume: Path | None) -> dict[str, Any]:
    torch.manual_seed(0)
    model = shard_model(Net())
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    callbacks = [
        AuxFromSecondEpoch(),
        SaveTrainingStateCallback(ckpt_dir, every_n_steps=2, keep_last=None, async_write=False),
    ]
    trainer = Trainer(model, nn.CrossEntropyLoss(), optimizer, seed=0, callbacks=callbacks)
    trainer.train(data(), num_epochs=2, per_device_batch_size=4, resume_from=resume)
    weights, optim_state = fsdp.full_state_dicts(model, optimizer)
    return {"weights": weights, "optimizer": optim_state, "step": trainer.state.global_step}


def refusal(ckpt: Path, split: bool) -> str:
    """The checkpoint loaded into an optimizer with two groups (``split``), or with one
    group that lacks the ``aux`` head (the parameters of another model)."""
    model = shard_model(Net())
    groups = [{"params": [*model.body.parameters(), *model.head.parameters()]}]
    if split:
        groups.append({"params": list(model.aux.parameters()), "lr": 0.01})
    trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.AdamW(groups), callbacks=[])
    try:
        trainer.load_checkpoint(ckpt)
    except ValueError as error:
        return str(error)
    return "loaded"


def main(out: Path) -> None:
    dist.init_distributed()
    full = run(out / "full", None)
    first = next((out / "full").glob("ckpt-*-step2.pt"))  # inside the first epoch
    resumed = run(out / "resumed", first)
    refusals = [refusal(first, split) for split in (True, False)]
    if dist.get_rank() == 0:
        result = {"full": full, "resumed": resumed, "refusals": refusals}
        torch.save(result, out / "result.pt")
    dist.destroy_distributed()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
