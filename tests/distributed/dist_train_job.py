"""Training job run by the distributed tests under torchrun, `scramjet launch` and launch().

``python dist_train_job.py MODE OUT [ARG]`` with MODE:

- ``full``: trains with ``shuffle=False`` (the single-process run with the global batch
  sees the same batches), checkpoints every 2 steps, evaluates and predicts 33 samples,
  then trains a second model with shuffling to record which indices each rank saw.
- ``resume``: the ``full`` training resumed from checkpoint file ARG.
- ``raise``: rank 1 raises ValueError at optimizer step 2.
- ``hang``: rank 1 stalls at step 2; the others must fail on the collective timeout.

Each rank writes ``OUT/rank{r}.pt``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.runtime import distributed as dist
from scramjet.trainer.data_order import ShardSampler

NUM_TRAIN, NUM_EVAL, GLOBAL_BATCH, ACCUM, EPOCHS, LR = 40, 33, 8, 2, 2, 0.1
# 40 samples, global batch 8: 5 batches per epoch, windows of 2 → 3 updates per epoch.
STEPS = EPOCHS * 3


class IndexedData(Dataset[tuple[torch.Tensor, torch.Tensor, int]]):
    """``(x, y, index)`` samples; the Trainer uses the first two, tests read the index."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 8, generator=g)
        self.y = (self.x[:, 0] - self.x[:, 3] > 0).long() + (self.x[:, 5] > 0.8).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        return self.x[i], self.y[i], i


def make_model() -> nn.Module:
    """The same initial weights in every process."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))


class SeenIndices(TrainerCallback):
    """Records the sample indices of every training batch, per epoch."""

    def __init__(self) -> None:
        self.by_epoch: dict[int, list[int]] = {}

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        indices = kwargs["batch"][2].tolist()
        self.by_epoch.setdefault(trainer.state.epoch, []).extend(indices)


class CountAllReduces(TrainerCallback):
    """Counts the gradient all-reduces DDP makes (one per bucket per synchronised backward)."""

    def __init__(self) -> None:
        self.calls = 0

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations
            self.calls += 1
            return allreduce_hook(None, bucket)  # type: ignore[arg-type]

        if isinstance(trainer.model, nn.parallel.DistributedDataParallel):
            trainer.model.register_comm_hook(None, hook)


class RaiseOnRank(TrainerCallback):
    """Raises on one rank at one optimizer step."""

    def __init__(self, rank: int, step: int) -> None:
        self.rank, self.step = rank, step

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if dist.get_rank() == self.rank and trainer.state.global_step == self.step:
            raise ValueError(f"rank {self.rank} failed on purpose at step {self.step}")


class StallOnRank(TrainerCallback):
    """Stops one rank for two minutes at one optimizer step (a stuck process)."""

    def __init__(self, rank: int, step: int) -> None:
        self.rank, self.step = rank, step

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if dist.get_rank() == self.rank and trainer.state.global_step == self.step:
            time.sleep(120)


def train_in_order(
    ckpt_dir: Path | None, resume_from: Path | None = None, extra: tuple[Any, ...] = ()
) -> tuple[Trainer, list[int]]:
    """Unshuffled training with the global batch split over the ranks."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    steps: list[int] = []
    opt.register_step_post_hook(lambda *_: steps.append(1))
    allreduces = CountAllReduces()
    callbacks: list[Any] = [allreduces, *extra]
    if ckpt_dir is not None:
        callbacks.append(
            SaveTrainingStateCallback(
                ckpt_dir, every_n_steps=2, every_n_epochs=None, keep_last=None
            )
        )
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=callbacks, seed=3)
    trainer.train(
        IndexedData(NUM_TRAIN, seed=1),
        num_epochs=EPOCHS,
        eval_dataset=IndexedData(NUM_EVAL, seed=2),
        per_device_batch_size=GLOBAL_BATCH // dist.get_world_size(),
        gradient_accumulation_steps=ACCUM,
        train_dataloader_kwargs={"shuffle": False},
        resume_from=resume_from,
    )
    trainer.allreduces = allreduces.calls  # type: ignore[attr-defined]
    return trainer, steps


def shuffled_indices() -> dict[int, list[int]]:
    """Indices this rank saw per epoch with shuffling on (and no seed given)."""
    seen = SeenIndices()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=[seen])
    trainer.train(IndexedData(NUM_TRAIN, seed=1), num_epochs=3, per_device_batch_size=4)
    return seen.by_epoch


def result(trainer: Trainer, steps: list[int]) -> dict[str, Any]:
    """What every mode reports: weights, history, counters."""
    return {
        "world": dist.get_world_size(),
        "weights": {k: v.clone() for k, v in trainer.unwrapped_model.state_dict().items()},
        "history": trainer.run_history.state_dict(),
        "global_step": trainer.state.global_step,
        "optimizer_steps": len(steps),
        "allreduces": getattr(trainer, "allreduces", None),
        "wrapped": type(trainer.model).__name__,
    }


def run(mode: str, out: str, arg: str | None = None) -> dict[str, Any]:
    """Run ``mode`` in this process and write ``OUT/rank{r}.pt``; returns the report."""
    out_dir = Path(out)
    rank = dist.get_rank()
    report: dict[str, Any]
    if mode == "full":
        trainer, steps = train_in_order(out_dir / "ckpt")
        report = result(trainer, steps)
        report["predictions"] = trainer.predict(IndexedData(NUM_EVAL, seed=2), 4)
        data = IndexedData(NUM_EVAL, seed=2)  # a ready loader over each rank's share
        shard = ShardSampler(data, dist.get_world_size(), rank)
        report["loader_predictions"] = trainer.predict(DataLoader(data, 4, sampler=shard))
        report["shuffled"] = shuffled_indices()
        # fewer samples than processes: the one row on every rank (rank 1 holds none)
        tiny = IndexedData(1, seed=2)
        with torch.no_grad():
            expected = trainer.unwrapped_model(tiny.x)
        report["tiny_predict"] = (trainer.predict(tiny), expected)
    elif mode == "resume":
        trainer, steps = train_in_order(None, resume_from=Path(str(arg)))
        report = result(trainer, steps)
    elif mode == "raise":
        trainer, steps = train_in_order(None, extra=(RaiseOnRank(1, 2),))
        report = result(trainer, steps)
    elif mode == "hang":
        trainer, steps = train_in_order(None, extra=(StallOnRank(1, 2),))
        report = result(trainer, steps)
    else:
        raise ValueError(f"unknown mode {mode!r}; expected full, resume, raise or hang")
    torch.save(report, out_dir / f"rank{rank}.pt")
    return report


def launched(mode: str, out: str) -> int:
    """Entry point for ``scramjet.runtime.launch`` (returns rank 0's step count)."""
    dist.init_distributed()
    return int(run(mode, out)["global_step"])


if __name__ == "__main__":
    run(*sys.argv[1:4])
    dist.destroy_distributed()
