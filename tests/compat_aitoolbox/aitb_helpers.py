"""A TTModel and DataLoaders shaped like the seed's README examples."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet.compat.aitoolbox import TTModel


class MyNeuralModel(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(6, 16)
        self.l2 = nn.Linear(16, 3)

    def forward(self, x_data_batch: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.relu(self.l1(x_data_batch)))

    def get_loss(self, batch_data, criterion, device):
        x, y = batch_data
        return criterion(self(x.to(device)), y.to(device))

    def get_predictions(self, batch_data, device):
        x, y = batch_data
        return self(x.to(device)).argmax(dim=1).cpu(), y.cpu(), {"first_feature": x[:, 0].tolist()}


def dataset(n: int, seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=gen)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return TensorDataset(x, y)


def loaders(batch_size: int = 16) -> tuple[DataLoader, DataLoader, DataLoader]:
    return (
        DataLoader(dataset(96, 0), batch_size=batch_size, shuffle=True),
        DataLoader(dataset(33, 1), batch_size=10),
        DataLoader(dataset(21, 2), batch_size=10),
    )
