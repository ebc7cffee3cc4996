"""A loss of a complex dtype (a loss over complex outputs left unreduced to a real number)
is refused at the first batch with a message naming the dtype and the fix, instead of
torch's 'grad can be implicitly created only for real scalar outputs' after a warning that
the imaginary part was dropped from the logged loss."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def _complex_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(outputs, targets).to(torch.complex64)


@pytest.mark.parametrize("where", ["train", "evaluate"])
def test_a_complex_loss_names_its_dtype_and_the_fix(where: str) -> None:
    model = nn.Linear(4, 3)
    trainer = Trainer(model, _complex_loss, torch.optim.SGD(model.parameters(), lr=0.1))
    data = TensorDataset(torch.randn(8, 4), torch.zeros(8, dtype=torch.long))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'casting complex values to real' on the way
        with pytest.raises(ValueError, match=r"complex64") as info:
            if where == "train":
                trainer.train(data, num_epochs=1, per_device_batch_size=4)
            else:
                trainer.evaluate(data, per_device_batch_size=4)
    assert ".abs()" in str(info.value) and ".real" in str(info.value)
    assert trainer.state.global_step == 0
