"""set_epoch() cannot reach a dataset's copies in running persistent worker processes:
the Trainer says so once (they went on with their first epoch's shuffle or augmentations,
silently), unless the dataset says its epoch lives in shared memory (as packs do)."""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.utils.data import Dataset

from scramjet import Trainer


class EpochAware(Dataset):
    def __init__(self) -> None:
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor([float(self.epoch)]), torch.tensor([0.0])


class SharedEpoch(EpochAware):
    epoch_in_shared_memory = True


def _warnings(dataset: Dataset, persistent: bool) -> list[str]:
    model = nn.Linear(1, 1)
    trainer = Trainer(
        model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    kwargs = {"num_workers": 1, "persistent_workers": persistent}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(
            dataset, num_epochs=3, per_device_batch_size=4, train_dataloader_kwargs=kwargs
        )
    return [str(w.message) for w in caught if "set_epoch() reaches only" in str(w.message)]


def test_persistent_workers_that_cannot_see_set_epoch_are_named_once() -> None:
    said = _warnings(EpochAware(), persistent=True)
    assert len(said) == 1 and said[0].startswith("EpochAware.set_epoch()"), said
    assert "persistent_workers=False" in said[0] and "epoch_in_shared_memory" in said[0]
    assert _warnings(EpochAware(), persistent=False) == []  # new workers copy each epoch
    assert _warnings(SharedEpoch(), persistent=True) == []
