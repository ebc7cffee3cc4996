"""Inputs whose floating dtype is not the model's: the conversion the error suggests is the
one to the weights' dtype (x.double() for a float64 model, not x.float())."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def _data(dtype: torch.dtype) -> TensorDataset:
    gen = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(12, 4, generator=gen).to(dtype), torch.zeros(12, dtype=torch.long)
    )


def _error(model_dtype: torch.dtype, data_dtype: torch.dtype) -> str:
    model = nn.Linear(4, 3).to(model_dtype)
    trainer = Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    with pytest.raises(RuntimeError) as info:
        trainer.train(_data(data_dtype), num_epochs=1, per_device_batch_size=4)
    return str(info.value)


def test_float32_inputs_into_a_float64_model_are_told_to_become_float64() -> None:
    text = _error(torch.float64, torch.float32)
    assert "float32" in text and "float64" in text
    assert "x.double()" in text
    assert "x.float()" not in text  # float32 already: that conversion changes nothing
    assert "numpy" not in text  # no float64 input here: numpy's default is not the cause


def test_float64_inputs_into_a_float32_model_still_get_the_numpy_hint() -> None:
    text = _error(torch.float32, torch.float64)
    assert "x.float()" in text and "numpy" in text


def test_float32_inputs_into_a_bfloat16_model_are_told_to_become_bfloat16() -> None:
    text = _error(torch.bfloat16, torch.float32)
    assert "x.bfloat16()" in text and "x.float()" not in text
