"""FSDP2 training job run by tests/distributed/test_fsdp.py under torchrun (and in-process).

``python fsdp_job.py MODE OUT [CKPT ...]`` with MODE:

- ``full``: shards the model with ``shard_model``, trains it unshuffled with gradient
  accumulation and clipping (the single-process run with the global batch sees the same
  batches), checkpoints every 2 steps, evaluates 33 samples, predicts 33 samples, saves a
  final full-state-dict checkpoint, and checks that an optimizer created before sharding
  is refused.
- ``resume``: the ``full`` training resumed from each checkpoint file CKPT in turn.
- ``ddp_exit``: trains with DDP and returns without destroying the process group.
- ``fp16_best``: fp16 with a GradScaler on a sharded model, one rank's gradient shard
  poisoned with an inf before update ``POISON_STEP``, and ``SaveBestModelCallback``
  watching the eval loss (best weights written, then loaded back at the end).

Each rank writes ``OUT/rank{r}.pt``.
"""

from __future__ import annotations

import atexit
import sys
from pathlib import Path
from typing import Any

import torch
from dist_train_job import IndexedData, make_model
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import (
    LimitEvalStepsCallback,
    SaveBestModelCallback,
    SaveTrainingStateCallback,
)
from scramjet.runtime import distributed as dist
from scramjet.runtime import shard_model

NUM_TRAIN, NUM_EVAL, GLOBAL_BATCH, ACCUM, EPOCHS, LR = 40, 33, 8, 2, 2, 0.1
STEPS = EPOCHS * 3  # 5 batches per epoch, windows of 2: 3 updates per epoch
CLIP_VALUE, CLIP_NORM = 0.1, 0.3  # both change the result (checked by a test)


class ReduceScatterCounter:
    """Counts FSDP's gradient reduce-scatters (one per sharded unit per synced backward)."""

    def __init__(self) -> None:
        import torch.distributed as tdist

        self.calls = 0
        self._tdist = tdist
        self._original = getattr(tdist, "reduce_scatter_single", None)
        if self._original is not None:
            tdist.reduce_scatter_single = self._counted  # type: ignore[attr-defined]

    def _counted(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self._original(*args, **kwargs)  # type: ignore[misc]

    def close(self) -> None:
        if self._original is not None:
            self._tdist.reduce_scatter_single = self._original  # type: ignore[attr-defined]


def make_trainer(ckpt_dir: Path | None) -> Trainer:
    """A sharded model (a no-op in one process) and its optimizer, created after sharding."""
    model = shard_model(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    callbacks: list[Any] = []
    if ckpt_dir is not None:
        callbacks.append(
            SaveTrainingStateCallback(
                ckpt_dir, every_n_steps=2, every_n_epochs=None, keep_last=None
            )
        )
    return Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=callbacks, seed=3)


def train(trainer: Trainer, resume_from: Path | None = None) -> None:
    """Unshuffled training with the global batch split over the ranks."""
    trainer.train(
        IndexedData(NUM_TRAIN, seed=1),
        num_epochs=EPOCHS,
        eval_dataset=IndexedData(NUM_EVAL, seed=2),
        per_device_batch_size=GLOBAL_BATCH // dist.get_world_size(),
        gradient_accumulation_steps=ACCUM,
        gradient_clip_value=CLIP_VALUE,
        gradient_clip_norm=CLIP_NORM,
        train_dataloader_kwargs={"shuffle": False},
        resume_from=resume_from,
    )


def full_weights(trainer: Trainer, path: Path) -> dict[str, torch.Tensor]:
    """Save a full checkpoint (all ranks) and read its model weights back (every rank)."""
    trainer.save_checkpoint(path)
    dist.barrier()
    return dict(torch.load(path, weights_only=True)["state"]["model"])


def bad_optimizer_error() -> str:
    """The error for an optimizer created before sharding."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    model = shard_model(model)
    try:
        Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=[])
    except ValueError as error:
        return str(error)
    return "no error"


def limited_eval_loss(trainer: Trainer) -> float:
    """Evaluation ended by end_epoch() after 3 global batches (the first 24 samples)."""
    trainer.add_callback(LimitEvalStepsCallback(3))
    trainer.evaluate(IndexedData(NUM_EVAL, seed=2), GLOBAL_BATCH // dist.get_world_size())
    return float(trainer.run_history.get_latest_metric("eval_loss_epoch"))


def run_full(out: Path) -> dict[str, Any]:
    counter = ReduceScatterCounter()
    trainer = make_trainer(out / "ckpt")
    train(trainer)
    counter.close()
    history = trainer.run_history.state_dict()
    trainer.evaluate(IndexedData(NUM_EVAL, seed=2), per_device_batch_size=4)
    return {
        "world": dist.get_world_size(),
        "model_class": type(trainer.model).__name__,
        "param_types": sorted({type(p).__name__ for p in trainer.model.parameters()}),
        "weights": full_weights(trainer, out / "final.pt"),
        "history": history,
        "evaluate_loss": trainer.run_history.get_latest_metric("eval_loss_epoch"),
        "global_step": trainer.state.global_step,
        "reduce_scatters": counter.calls,
        "predictions": trainer.predict(IndexedData(NUM_EVAL, seed=2), 4),
        "limited_eval_loss": limited_eval_loss(trainer),
        "bad_optimizer": bad_optimizer_error(),
    }


def run_resume(out: Path, checkpoints: list[str]) -> dict[str, Any]:
    runs = []
    for i, ckpt in enumerate(checkpoints):
        trainer = make_trainer(None)
        train(trainer, resume_from=Path(ckpt))
        runs.append(
            {
                "weights": full_weights(trainer, out / f"resumed{i}.pt"),
                "history": trainer.run_history.state_dict(),
                "global_step": trainer.state.global_step,
            }
        )
    return {"runs": runs}


POISON_STEP = 2  # the update whose gradients get an inf on the last rank only


def _local(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (the tensor itself when not sharded)."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


class Fp16Trainer(Trainer):
    """Records, for every update, whether this rank's parameters changed and the loss scale
    after it; before update ``POISON_STEP`` the last rank's first gradient element is set to
    inf (its own shard only under FSDP, so the other rank sees finite gradients)."""

    updates: list[tuple[bool, float]]

    def clip_gradients(self) -> None:  # runs before the scaler unscales and steps
        if self.state.global_step == POISON_STEP and dist.get_rank() == dist.get_world_size() - 1:
            grad = next(iter(self.model.parameters())).grad
            assert grad is not None
            _local(grad).view(-1)[0] = float("inf")
        super().clip_gradients()

    def optimizer_step(self) -> None:
        before = [_local(p).detach().clone() for p in self.model.parameters()]
        super().optimizer_step()
        after = [_local(p) for p in self.model.parameters()]
        changed = any(not torch.equal(a, b) for a, b in zip(before, after))
        assert self.scaler is not None
        self.updates.append((changed, float(self.scaler.get_scale())))


def run_fp16_best(out: Path) -> dict[str, Any]:
    model = shard_model(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    best = SaveBestModelCallback(out / "best.pt", load_saved_checkpoint=True)
    trainer = Fp16Trainer(
        model, nn.CrossEntropyLoss(), opt, callbacks=[best], precision="fp16", seed=3
    )
    trainer.updates = []
    trainer.train(
        IndexedData(NUM_TRAIN, seed=1),
        num_epochs=4,
        eval_dataset=IndexedData(NUM_EVAL, seed=2),
        per_device_batch_size=GLOBAL_BATCH // dist.get_world_size(),
        train_dataloader_kwargs={"shuffle": False},
    )
    return {
        "updates": trainer.updates,
        "eval_losses": trainer.run_history.get_metric_values("eval_loss_epoch"),
        "train_losses": trainer.run_history.get_metric_values("train_loss_epoch"),
        "final_weights": full_weights(trainer, out / "after_best.pt"),
    }


_KEPT: list[Trainer] = []  # the DDP trainer stays alive until the interpreter exits
_RANK: list[int] = []


def _report_at_exit(out: Path) -> None:
    """Runs after scramjet's exit hook (registered later, so called earlier)."""
    import torch.distributed as tdist

    state = f"{tdist.is_initialized()} {type(_KEPT[0].model).__name__}"
    (out / f"exit{_RANK[0]}.txt").write_text(state)


def run_ddp_exit(out: Path) -> dict[str, Any]:
    """DDP training; the caller then returns without destroy_distributed()."""
    atexit.register(_report_at_exit, out)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    trainer = Trainer(model, nn.CrossEntropyLoss(), opt, callbacks=[], seed=0)
    trainer.train(IndexedData(NUM_TRAIN, seed=1), num_epochs=2, per_device_batch_size=4)
    _KEPT.append(trainer)
    _RANK.append(dist.get_rank())
    return {"wrapped": type(trainer.model).__name__, "step": trainer.state.global_step}


def main(mode: str, out: str, *rest: str) -> dict[str, Any]:
    out_dir = Path(out)
    if mode == "full":
        report = run_full(out_dir)
    elif mode == "resume":
        report = run_resume(out_dir, list(rest))
    elif mode == "ddp_exit":
        report = run_ddp_exit(out_dir)
    elif mode == "fp16_best":
        report = run_fp16_best(out_dir)
    else:
        raise ValueError(f"unknown mode {mode!r}; expected full, resume, ddp_exit or fp16_best")
    torch.save(report, out_dir / f"rank{dist.get_rank()}.pt")
    return report


if __name__ == "__main__":
    main(*sys.argv[1:])
    # No destroy_distributed(): scramjet ends the process group at exit, after releasing
    # the DDP wrapper (the ddp_exit mode tests exactly that).
