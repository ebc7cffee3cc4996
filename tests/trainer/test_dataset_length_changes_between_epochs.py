"""A dataset whose length changes between epochs (curriculum learning adding samples,
hard-example mining removing them) is read whole at every epoch, as torch's samplers
read ``len()`` again each epoch. The Trainer's samplers kept the first epoch's length:
new samples were never trained or evaluated, and a shrunk dataset raised IndexError."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback


class Growing(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < self.n:
            raise IndexError(f"index {i} out of range for {self.n} samples")
        return torch.tensor([float(i)]), torch.tensor([0.0])


class Count(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(1, 1)
        self.trained: list[set[int]] = []
        self.evaluated: list[set[int]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seen = self.trained if self.training else self.evaluated
        seen[-1].update(int(v) for v in x[:, 0])
        return self.lin(x)


class Resize(TrainerCallback):
    def __init__(self, datasets: list[Growing], sizes: list[int]) -> None:
        self.datasets, self.sizes = datasets, sizes

    def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        trainer.unwrapped_model.trained.append(set())

    def on_eval_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        trainer.unwrapped_model.evaluated.append(set())

    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        epoch = trainer.state.epoch + 1  # the next epoch, counted from 0
        for ds in self.datasets:  # the next epoch's data
            ds.n = self.sizes[min(epoch, len(self.sizes) - 1)]


def _run(sizes: list[int]) -> Count:
    train, evaluation = Growing(sizes[0]), Growing(sizes[0])
    model = Count()
    trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.01),
                      callbacks=[Resize([train, evaluation], sizes)])  # fmt: skip
    trainer.train(train, num_epochs=len(sizes), per_device_batch_size=4, eval_dataset=evaluation)
    return model


def test_every_epoch_covers_the_datasets_length_at_its_start() -> None:
    for sizes in ([8, 16, 24], [24, 16, 8]):
        model = _run(sizes)
        assert model.trained == [set(range(n)) for n in sizes], sizes
        assert model.evaluated == [set(range(n)) for n in sizes], sizes
