"""An IterableDataset with a ``__len__`` read by two DataLoader workers, whose ``__iter__``
does not split the samples among them: every worker yields all of them, so each sample is
trained twice per epoch. The warning about the length must not say that no sample is
repeated."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import torch
from torch import nn
from torch.utils.data import IterableDataset

from scramjet import Trainer


class Unsplit(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """Yields every sample in every worker (no ``get_worker_info()``)."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for i in range(len(self.x)):
            yield self.x[i], self.y[i]

    def __len__(self) -> int:
        return len(self.x)


def test_the_length_warning_says_an_unsplit_dataset_trains_each_sample_once_per_worker() -> None:
    model = nn.Linear(4, 2)
    trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(
            Unsplit(), num_epochs=1, per_device_batch_size=4,
            train_dataloader_kwargs={"num_workers": 2},
        )  # fmt: skip
    assert trainer.state.global_step == 8  # 2 workers x 16 samples / 4: every sample twice
    [message] = [str(w.message) for w in caught if "more batches than its length" in str(w.message)]
    assert "lost or repeated" not in message
    assert "get_worker_info" in message and "trained 2 times per epoch" in message
