"""Negative class targets (-1 marking unlabelled samples, labels shifted by one) into
CrossEntropyLoss: the error names the negative values and ignore_index, instead of
advising a model with '0 outputs for labels 0..-1'."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def _trainer(loss: nn.Module) -> Trainer:
    model = nn.Linear(4, 3)
    return Trainer(model, loss, torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])


def _data(targets: list[int]) -> TensorDataset:
    return TensorDataset(torch.randn(len(targets), 4), torch.tensor(targets))


def test_minus_one_targets_point_to_ignore_index() -> None:
    with pytest.raises(IndexError) as info:
        _trainer(nn.CrossEntropyLoss()).train(_data([0, -1, 2, -1]), 1, per_device_batch_size=4)
    text = str(info.value)
    assert "smallest target in this batch is -1" in text
    assert "ignore_index=-1" in text
    assert "0..-1" not in text and "(0 for" not in text


def test_minus_one_targets_with_ignore_index_train() -> None:
    trainer = _trainer(nn.CrossEntropyLoss(ignore_index=-1))
    trainer.train(_data([0, -1, 2, -1]), 1, per_device_batch_size=4)
    assert trainer.state.global_step == 1


def test_targets_too_large_keep_the_class_count_hint() -> None:
    with pytest.raises(IndexError, match=r"largest target in this batch is 5.*6 for labels 0\.\.5"):
        _trainer(nn.CrossEntropyLoss()).train(_data([0, 5, 2, 1]), 1, per_device_batch_size=4)
