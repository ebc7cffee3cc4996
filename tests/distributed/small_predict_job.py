"""Job (run by torchrun in every process): predict and evaluate one sample on 2 ranks;
writes OUT/rank{r}.pt with the predictions and the model's own outputs."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.runtime import distributed as dist


class Tagged(nn.Module):
    """The model's logits and a text tag per row."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> dict[str, object]:
        return {"logits": self.model(x), "tags": [f"row of {len(x)}"] * len(x)}


def main(out: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(6, 2)
    x, y = torch.randn(1, 6), torch.tensor([1])
    trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1))
    trainer.evaluate(TensorDataset(x, y), per_device_batch_size=2)  # works on 1 sample
    predictions = trainer.predict(TensorDataset(x, y), per_device_batch_size=2)
    # an output of several kinds: a dict of a tensor and a list (rank 1 holds no row)
    tagged = Trainer(Tagged(model), nn.CrossEntropyLoss(), trainer.optimizer)
    both = tagged.predict(TensorDataset(x, y))
    with torch.no_grad():
        expected = model(x)
    saved = {"pred": predictions, "expected": expected, "both": both}
    torch.save(saved, out / f"rank{dist.get_rank()}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    dist.destroy_distributed()
