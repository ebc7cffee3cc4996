"""``trainer.train(ds, 3, 32)`` (Keras' fit order: epochs, then batch size) puts the batch
size where eval_dataset goes: the error says so and how to pass it, instead of telling the
user to wrap tensors in a TensorDataset."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def _trainer() -> Trainer:
    model = nn.Linear(4, 3)
    return Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )


def _data() -> TensorDataset:
    return TensorDataset(torch.randn(8, 4), torch.zeros(8, dtype=torch.long))


@pytest.mark.parametrize("size", [32, 1])
def test_a_batch_size_given_third_by_position_points_to_the_keyword(size: int) -> None:
    trainer = _trainer()
    with pytest.raises(TypeError) as info:
        trainer.train(_data(), 3, size)  # type: ignore[arg-type]
    text = str(info.value)
    assert "eval_dataset" in text and f"received the int {size}" in text
    assert f"per_device_batch_size={size}" in text
    assert "TensorDataset" not in text
    assert trainer.state.global_step == 0  # refused before any step


def test_other_wrong_evaluation_data_keeps_its_error() -> None:
    with pytest.raises(TypeError, match=r"eval_dataset must be .*received float"):
        _trainer().train(_data(), 3, 0.5)  # type: ignore[arg-type]
