"""Run by test_nan_guard.py under torchrun: rank 1's loss becomes NaN at its 5th batch.

Each rank writes ``OUT/rank{r}.json`` with the error it got from ``train()`` and the
optimizer step it stopped at.
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
from scramjet.callbacks import TerminateOnNaNCallback, TrainingNaNError
from scramjet.runtime import distributed as dist

BAD_BATCH = 5  # 1-based, on rank 1 only


class NaNOnRankOne(Trainer):
    """Rank 1 reports a NaN loss for one batch; the model itself stays finite.

    Adding a NaN constant leaves the gradients finite, so rank 0 never sees a NaN itself
    and must learn about it from the guard's collective.
    """

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        out = super().calculate_train_batch_loss(batch)
        seen = self.state.batches_seen_in_epoch + 1
        if dist.get_rank() == 1 and seen == BAD_BATCH and self.run_history.current_epoch == 1:
            out["loss"] = out["loss"] + torch.tensor(float("nan"))
        return out


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    data = TensorDataset(torch.randn(160, 4), torch.randint(0, 2, (160,)))
    trainer = NaNOnRankOne(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[TerminateOnNaNCallback(check_every=4)],
    )
    error = ""
    try:
        trainer.train(data, num_epochs=3, per_device_batch_size=4)
    except TrainingNaNError as exc:
        error = str(exc)
    record = {"error": error, "global_step": trainer.state.global_step}
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    dist.destroy_distributed()
