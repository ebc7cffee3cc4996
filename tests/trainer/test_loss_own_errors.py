"""A loss function's own error, raised while the outputs and targets are right for the loss,
reaches the user as it was raised: no line about the shapes and no advice about target
dtypes is added. Targets that really are wrong for the loss still get the usual fix."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer

MESSAGE = "my loss: label smoothing table missing for this batch"


def _train(loss: object, targets: torch.Tensor, outputs: int = 2) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, outputs)
    data = TensorDataset(torch.randn(len(targets), 4), targets)
    trainer = Trainer(model, loss, torch.optim.SGD(model.parameters(), lr=0.1), seed=0)  # type: ignore[arg-type]
    trainer.train(data, num_epochs=1, per_device_batch_size=4)


def _failing_at_third_batch(error: type[Exception]) -> object:
    calls = {"n": 0}

    def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 3:
            raise error(MESSAGE)
        return nn.functional.cross_entropy(outputs, targets)

    return loss


@pytest.mark.parametrize("error", [ValueError, RuntimeError, IndexError, TypeError])
def test_a_loss_functions_own_error_on_class_index_targets_is_left_as_it_is(
    error: type[Exception],
) -> None:
    targets = torch.arange(16) % 2  # int64 class indices [N]: right for the loss
    with pytest.raises(error) as info:
        _train(_failing_at_third_batch(error), targets)
    assert str(info.value) == MESSAGE
    assert type(info.value) is error


def test_a_loss_functions_own_error_on_class_probabilities_is_left_as_it_is() -> None:
    def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        raise ValueError(MESSAGE)

    probabilities = torch.softmax(torch.randn(16, 2), dim=1)  # float, shaped like the outputs
    with pytest.raises(ValueError) as info:
        _train(loss, probabilities)
    assert str(info.value) == MESSAGE


def test_an_elementwise_losss_own_error_on_float_targets_is_left_as_it_is() -> None:
    # BCELoss refuses outputs outside [0, 1]: the float targets shaped like the outputs
    # are right, so the advice to make them float would mislead.
    with pytest.raises(RuntimeError) as info:
        _train(nn.BCELoss(), torch.rand(16, 1), outputs=1)
    assert "between 0 and 1" in str(info.value)
    assert "targets.float()" not in str(info.value)
    assert "received outputs" not in str(info.value)


def test_class_targets_of_another_integer_dtype_still_get_the_fix() -> None:
    targets = (torch.arange(16) % 2).to(torch.int32)
    with pytest.raises(RuntimeError) as info:
        _train(nn.CrossEntropyLoss(), targets)
    text = str(info.value)
    assert "received outputs (4, 2) float32 and targets (4,) int32" in text
    assert "class indices [N] of dtype int64" in text


def test_one_hot_integer_targets_still_get_the_fix() -> None:
    targets = nn.functional.one_hot(torch.arange(16) % 2, 2)  # int64 [N, C]
    with pytest.raises(RuntimeError) as info:
        _train(nn.CrossEntropyLoss(), targets)
    assert "not one-hot integers" in str(info.value)
