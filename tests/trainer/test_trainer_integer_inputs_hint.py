"""Integer inputs into a float model (uint8 images read with PIL or numpy, int64 numbers from
a CSV): torch only says that two dtypes differ ('Byte and Float', 'unsigned char'); the
error now names the inputs' dtype, the weights' and the conversion."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def _trainer(model: nn.Module) -> Trainer:
    return Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )


def _images(n: int = 8) -> TensorDataset:
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (n, 3, 6, 6), dtype=torch.uint8, generator=gen)
    return TensorDataset(x, torch.zeros(n, dtype=torch.long))


def _cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(32, 3))


@pytest.mark.parametrize("where", ["train", "evaluate", "predict"])
def test_uint8_images_into_a_float_model_point_to_converting_them(where: str) -> None:
    trainer = _trainer(_cnn())
    with pytest.raises(RuntimeError) as info:
        if where == "train":
            trainer.train(_images(), num_epochs=1, per_device_batch_size=4)
        elif where == "evaluate":
            trainer.evaluate(_images(), per_device_batch_size=4)
        else:
            trainer.predict(_images(), per_device_batch_size=4)
    text = str(info.value)
    assert "torch.uint8" in text and "torch.float32" in text
    assert "x.float() / 255" in text
    assert isinstance(info.value.__cause__, RuntimeError)  # torch's own error kept


def test_int64_features_into_a_linear_layer_point_to_converting_or_embedding() -> None:
    x = torch.randint(0, 10, (8, 4))
    trainer = _trainer(nn.Linear(4, 3))
    with pytest.raises(RuntimeError) as info:
        trainer.train(
            TensorDataset(x, torch.zeros(8, dtype=torch.long)), 1, per_device_batch_size=4
        )
    text = str(info.value)
    assert "torch.int64" in text and "x.float()" in text and "nn.Embedding" in text


def test_integer_targets_are_not_blamed_for_another_dtype_error() -> None:
    model = nn.Linear(4, 3)
    x = torch.randn(8, 4, dtype=torch.float64)  # the inputs are float64; the targets int64
    with pytest.raises(RuntimeError) as info:
        _trainer(model).train(
            TensorDataset(x, torch.zeros(8, dtype=torch.long)), 1, per_device_batch_size=4
        )
    assert "torch.float64" in str(info.value) and "int64" not in str(info.value)


def test_token_ids_into_an_embedding_train() -> None:
    model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(8, 3))
    x = torch.randint(0, 10, (8, 2))
    trainer = _trainer(model)
    trainer.train(TensorDataset(x, torch.zeros(8, dtype=torch.long)), 1, per_device_batch_size=4)
    assert trainer.state.global_step == 2
