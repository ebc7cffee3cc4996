"""StepLRScheduler refuses a step_size that torch's StepLR would divide by mid-training."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox import TrainLoop
from scramjet.compat.aitoolbox.torchtrain.schedulers.basic import StepLRScheduler


@pytest.mark.parametrize("step_size", [0, -1, 1.5, True])
def test_bad_step_size_is_refused_when_built(step_size: object) -> None:
    with pytest.raises(ValueError, match=r"step_size must be .* >= 1; received") as info:
        StepLRScheduler(step_size=step_size)  # type: ignore[arg-type]
    assert repr(step_size) in str(info.value)


def test_numpy_integer_step_size_is_accepted() -> None:
    assert StepLRScheduler(step_size=np.int64(3)).scheduler_args["step_size"] == 3


def test_valid_step_size_decays_like_torch_step_lr() -> None:
    model = MyNeuralModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    loop = TrainLoop(
        model,
        DataLoader(dataset(16, 0), batch_size=8),
        None,
        None,
        optimizer,
        torch.nn.CrossEntropyLoss(),
    )
    loop.fit(num_epochs=4, callbacks=[StepLRScheduler(step_size=2, gamma=0.1)])
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.01)
