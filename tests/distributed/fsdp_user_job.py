"""What a user moving a model to FSDP2 runs, under torchrun (2 gloo processes) and, for
the reference numbers, in one process (``shard_model`` is then a no-op).

``python fsdp_user_job.py OUT`` runs every scenario below in turn and writes
``OUT/rank{r}.pt`` (one entry per scenario; a scenario that raised records its error as
text, so the others still run):

- ``tied_lm``: an ``nn.Sequential`` language model whose head shares its weight with the
  embedding (both are children of the Sequential, so both would be default units);
- ``refusals``: the errors for explicit units that share a parameter and for a model
  sharded twice;
- ``keep_best``: ``reshard_after_forward=False`` with ``SaveBestModelCallback``, whose
  best weights are reloaded after an evaluation left the parameters gathered;
- ``gpt2``: a tiny Hugging Face GPT-2 (tied input and output embeddings) with AdamW, a
  warm-up/cosine schedule, gradient accumulation and norm clipping, checkpointed after
  every update (mid-epoch checkpoints for the resume tests);
- ``experiment``: the same GPT-2 run tracked by ``tracking.Experiment`` (last: it may fail
  on the main process only).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from scramjet import Trainer
from scramjet.callbacks import SaveBestModelCallback, SaveTrainingStateCallback
from scramjet.runtime import distributed as dist
from scramjet.runtime import shard_model
from scramjet.schedulers import CosineWarmupScheduler

# 48 samples, global batch 12, windows of 2: 4 micro-batches and 2 updates per epoch.
NUM_TRAIN, NUM_EVAL, GLOBAL_BATCH, ACCUM, EPOCHS = 48, 13, 12, 2, 2
VOCAB, LENGTH = 20, 6


def tied_lm() -> nn.Sequential:
    """Embedding, two layers, a head whose weight *is* the embedding's (same seed everywhere)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        embedding = nn.Embedding(VOCAB, 16)
        head = nn.Linear(16, VOCAB, bias=False)
        head.weight = embedding.weight
        return nn.Sequential(embedding, nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), head)


def token_pairs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB, (NUM_TRAIN, LENGTH), generator=g)
    return [(row, row.roll(1)) for row in x]


class LMTrainer(Trainer):
    """Next-token loss over every position of ``(tokens, targets)`` batches."""

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        x, y = batch
        out = self.model(x)
        loss = nn.functional.cross_entropy(out.flatten(0, 1), y.flatten())
        return {"loss": loss, "model_outputs": out, "batch_size": x.size(0)}


def per_device_batch() -> int:
    return GLOBAL_BATCH // dist.get_world_size()


def full_weights(trainer: Trainer, path: Path) -> dict[str, torch.Tensor]:
    """A full checkpoint (collective), its weights read back on every rank."""
    trainer.save_checkpoint(path)
    dist.barrier()
    return dict(torch.load(path, weights_only=True)["state"]["model"])


def run_tied_lm(out: Path) -> dict[str, Any]:
    model = shard_model(tied_lm())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = LMTrainer(model, None, opt, callbacks=[], seed=3)
    trainer.train(
        token_pairs(),
        num_epochs=EPOCHS,
        per_device_batch_size=per_device_batch(),
        gradient_accumulation_steps=ACCUM,
        gradient_clip_norm=0.3,
        train_dataloader_kwargs={"shuffle": False},
    )
    return {
        "weights": full_weights(trainer, out / "tied.pt"),
        "history": trainer.run_history.state_dict(),
        "still_tied": model[0].weight is model[4].weight,
    }


def _error(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "no error"


def run_refusals(out: Path) -> dict[str, Any]:
    del out
    return {
        "shared_units": _error(lambda: shard_model(tied_lm(), modules=["0", "4"])),
        "twice": _error(lambda: shard_model(shard_model(tied_lm()))),
    }


# ----------------------------------------------------------------------------- GPT-2
class Tokens(Dataset[dict[str, torch.Tensor]]):
    """Random token rows as ``{"input_ids", "labels"}`` (the model returns its own loss)."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(0, 50, (n, 12), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.x[i], "labels": self.x[i]}


def gpt2() -> nn.Module:
    """A two-block GPT-2 from a small config, no dropout, tied embeddings."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging

    logging.set_verbosity_error()
    config = GPT2Config(
        vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return GPT2LMHeadModel(config)


def gpt2_trainer(callbacks: list[Any], **shard_options: Any) -> Trainer:
    model = shard_model(gpt2(), **shard_options)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    return Trainer(model, None, opt, callbacks=callbacks, seed=3)


def train_gpt2(trainer: Trainer, resume_from: Path | None = None) -> None:
    trainer.train(
        Tokens(NUM_TRAIN, 1),
        num_epochs=EPOCHS,
        eval_dataset=Tokens(NUM_EVAL, 2),
        per_device_batch_size=per_device_batch(),
        gradient_accumulation_steps=ACCUM,
        gradient_clip_norm=0.5,
        train_dataloader_kwargs={"shuffle": False},
        create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1),
        resume_from=resume_from,
    )


def run_gpt2(out: Path) -> dict[str, Any]:
    save = SaveTrainingStateCallback(
        out / "gpt2_ckpt", every_n_steps=1, every_n_epochs=None, keep_last=None
    )
    trainer = gpt2_trainer([save])
    train_gpt2(trainer)
    return {
        "weights": full_weights(trainer, out / "gpt2.pt"),
        "history": trainer.run_history.state_dict(),
        "predictions": trainer.predict(Tokens(NUM_EVAL, 2)).logits,
    }


def run_keep_best(out: Path) -> dict[str, Any]:
    best = SaveBestModelCallback(out / "best.pt", watch_metric="eval_loss_epoch")
    trainer = gpt2_trainer([best], reshard_after_forward=False)
    train_gpt2(trainer)  # the last epoch's evaluation is not the best one
    return {
        "history": trainer.run_history.state_dict(),
        "weights": full_weights(trainer, out / "after_best.pt"),
        "best": dict(torch.load(out / "best.pt", weights_only=True)["state"]["model"]),
    }


def run_experiment(out: Path) -> dict[str, Any]:
    from scramjet.tracking import Experiment

    exp = Experiment("fsdp", "gpt2", root=out / "runs", checkpoint=None)
    trainer = gpt2_trainer([exp])
    train_gpt2(trainer)  # the same run as "gpt2": its weights are the reference
    return {"history": trainer.run_history.state_dict()}  # no collective after train()


SCENARIOS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "tied_lm": run_tied_lm,
    "refusals": run_refusals,
    "keep_best": run_keep_best,
    "gpt2": run_gpt2,
    "experiment": run_experiment,
}


def run_resume(out: Path, checkpoint: str) -> dict[str, Any]:
    """The ``gpt2`` run resumed from ``checkpoint``."""
    trainer = gpt2_trainer([])
    train_gpt2(trainer, resume_from=Path(checkpoint))
    return {
        "weights": full_weights(trainer, out / "resumed.pt"),
        "history": trainer.run_history.state_dict(),
    }


def main(out: str, *names: str) -> dict[str, Any]:
    """Run the named scenarios (all by default; ``resume=CKPT`` resumes ``gpt2``)."""
    out_dir = Path(out)
    report: dict[str, Any] = {}
    for name in names or tuple(SCENARIOS):
        try:
            if name.startswith("resume="):
                report["resume"] = run_resume(out_dir, name.removeprefix("resume="))
                continue
            report[name] = SCENARIOS[name](out_dir)
        except Exception as error:
            traceback.print_exc()
            report[name] = {"error": f"{type(error).__name__}: {error}"}
    torch.save(report, out_dir / f"rank{dist.get_rank()}.pt")
    return report


if __name__ == "__main__":
    main(*sys.argv[1:])
