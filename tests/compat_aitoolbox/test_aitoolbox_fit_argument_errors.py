"""TrainLoop.fit refuses wrong argument types with errors that name the argument the user passed."""

from __future__ import annotations

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox import TrainLoop
from scramjet.compat.aitoolbox.torchtrain.callbacks.basic import EarlyStopping


def _loop() -> TrainLoop:
    model = MyNeuralModel()
    return TrainLoop(
        model,
        DataLoader(dataset(16, 0), batch_size=8),
        None,
        None,
        torch.optim.SGD(model.parameters(), lr=0.1),
        torch.nn.CrossEntropyLoss(),
    )


@pytest.mark.parametrize("value", [0, -2, 1.5, True])
def test_bad_grad_accumulation_is_named_as_given(value: object) -> None:
    with pytest.raises(ValueError, match=r"grad_accumulation must be an int ≥ 1") as info:
        _loop().fit(num_epochs=1, grad_accumulation=value)  # type: ignore[arg-type]
    assert repr(value) in str(info.value)
    assert "gradient_accumulation_steps" not in str(info.value)


@pytest.mark.parametrize("name", ["num_epochs", "num_iterations"])
def test_length_given_as_a_string_is_a_type_error_naming_it(name: str) -> None:
    with pytest.raises(TypeError, match=rf"{name} must be an int; received str \('3'\)"):
        _loop().fit(**{name: "3"})


def test_one_callback_not_in_a_list_says_to_wrap_it() -> None:
    callback = EarlyStopping(monitor="loss")
    with pytest.raises(TypeError, match=r"callbacks must be a list.*EarlyStopping.*\[callback\]"):
        _loop().fit(num_epochs=1, callbacks=callback)  # type: ignore[arg-type]


def test_valid_arguments_still_train() -> None:
    loop = _loop()
    loop.fit(num_epochs=1, grad_accumulation=2, callbacks=(EarlyStopping(monitor="loss"),))
    assert len(loop.train_history["loss"]) == 1
