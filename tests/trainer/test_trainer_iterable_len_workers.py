"""An IterableDataset with a __len__, read by DataLoader workers: each worker batches its
own share, so an epoch can hold more batches than len(dataset) / batch_size. The warning
says so instead of blaming a __len__ that counts the samples exactly."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import torch
from torch import nn
from torch.utils.data import IterableDataset, get_worker_info

from scramjet import Trainer


class _Sharded(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """40 samples, split between the DataLoader workers; ``len`` is exact."""

    def __len__(self) -> int:
        return 40

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        info = get_worker_info()
        indices = range(40) if info is None else range(info.id, 40, info.num_workers)
        for i in indices:
            yield torch.full((3,), float(i)), torch.tensor(i % 2)


def test_workers_partial_batches_warning_tells_the_cause() -> None:
    model = nn.Linear(3, 2)
    trainer = Trainer(
        model, loss_func=nn.CrossEntropyLoss(), optimizer=torch.optim.SGD(model.parameters())
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(
            _Sharded(),
            num_epochs=1,
            per_device_batch_size=8,
            train_dataloader_kwargs={"num_workers": 2},
        )
    assert trainer.state.global_step == 6  # 20 samples per worker: 8 + 8 + 4, twice
    messages = [str(w.message) for w in caught if "more batches" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    message = messages[0]
    assert "num_workers=2" in message
    assert "each worker" in message
    # __len__ counts the samples exactly: the advice must not be to change it
    assert "Make __len__ of the dataset" not in message
