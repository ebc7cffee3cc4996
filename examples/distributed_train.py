"""Train, checkpoint, resume, evaluate and predict: one script for 1 process or many.

Run it unchanged::

    python examples/distributed_train.py --out runs/demo
    torchrun --nproc-per-node 2 examples/distributed_train.py --out runs/demo
    scramjet launch --nproc-per-node 2 examples/distributed_train.py --out runs/demo
    accelerate launch --multi_gpu --num_processes 2 examples/distributed_train.py --out runs/demo
    # two machines, one process each (run on node 0 with --node-rank 0, on node 1 with 1):
    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 1 --master-addr 10.0.0.1 \\
        --master-port 29500 examples/distributed_train.py --out runs/demo

The Trainer creates the process group from the launcher's environment (gloo on CPU,
NCCL on GPUs), wraps the model in DistributedDataParallel, gives every rank its own
reshuffled share of the data each epoch, and writes checkpoints and logs on rank 0
only. Run it again with ``--resume`` to continue from the latest checkpoint in
``OUT/checkpoints`` at the exact step it was saved.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer, seed_everything
from scramjet.callbacks import LogMetricsCallback, SaveTrainingStateCallback
from scramjet.runtime import distributed as dist
from scramjet.schedulers import CosineWarmupScheduler


def make_data(n: int, seed: int) -> TensorDataset:
    """A 3-class problem: Gaussian blobs in 16 dimensions (``seed`` draws the samples)."""
    centres = torch.randn(3, 16, generator=torch.Generator().manual_seed(0)) * 2.0
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    return TensorDataset(centres[y] + 1.5 * torch.randn(n, 16, generator=g), y)


def main() -> None:
    """Parse options, train (or resume), evaluate, predict, and write a summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/distributed_train"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16, help="per process")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoints")
    args = parser.parse_args()

    seed_everything(0)  # the same initial weights on every run (DDP copies rank 0's)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    checkpoints = args.out / "checkpoints"
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        optimizer,
        callbacks=[
            LogMetricsCallback(),  # prints on rank 0 only
            SaveTrainingStateCallback(checkpoints, every_n_steps=10, keep_last=2),
        ],
        seed=0,
    )
    train_data, eval_data = make_data(512, seed=1), make_data(33, seed=2)
    trainer.train(
        train_data,
        num_epochs=args.epochs,
        eval_dataset=eval_data,
        per_device_batch_size=args.batch_size,
        gradient_accumulation_steps=2,
        create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1),
        resume_from=checkpoints if args.resume else None,
    )
    # Every rank predicts its share; the result is gathered in dataset order, unpadded.
    predictions = trainer.predict(eval_data, per_device_batch_size=8)
    accuracy = float((predictions.argmax(1) == eval_data.tensors[1]).float().mean())
    if trainer.is_main_process:
        summary = {
            "processes": trainer.num_processes,
            "precision": trainer.precision,
            "optimizer_steps": trainer.state.global_step,
            "predictions": len(predictions),
            "eval_accuracy": accuracy,
            "eval_loss": trainer.run_history.get_latest_metric("eval_loss_epoch"),
        }
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
        trainer.print(json.dumps(summary))


if __name__ == "__main__":
    main()
    # After main() has returned: the trainer (and the DDP wrapper that uses the process
    # group) is gone by then, so the group can be torn down cleanly.
    dist.destroy_distributed()
