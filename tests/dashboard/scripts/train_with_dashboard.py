"""A small training run with the Dashboard, for the real-terminal test."""

from __future__ import annotations

import torch
from torch.utils.data import TensorDataset

from scramjet.dashboard import Dashboard
from scramjet.trainer import Trainer


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(512, 16)
    y = (x[:, :4].argmax(dim=1)).long()
    board = Dashboard(span=40, divisor=6, window=2, refresh_per_second=10)
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.2),
        callbacks=[board],
        seed=0,
    )
    trainer.train(
        TensorDataset(x, y),
        num_epochs=3,
        per_device_batch_size=16,
        eval_dataset=TensorDataset(x[:128], y[:128]),
    )


if __name__ == "__main__":
    main()
