"""create_scheduler_fn must return a scheduler: a function that builds one and forgets to
return it (or returns the optimizer) trained on at a constant learning rate, with no word."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def _trainer() -> tuple[Trainer, torch.optim.Optimizer]:
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[]), optimizer


def _data() -> TensorDataset:
    return TensorDataset(torch.randn(8, 4), torch.zeros(8, dtype=torch.long))


def _forgets_return(optimizer: torch.optim.Optimizer) -> None:
    torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)  # no return


@pytest.mark.parametrize(
    ("fn", "received"),
    [(_forgets_return, "None"), (lambda optimizer: optimizer, "SGD")],
    ids=["none", "optimizer"],
)
def test_a_scheduler_fn_that_returns_no_scheduler_is_refused_before_the_first_step(
    fn: Any, received: str
) -> None:
    trainer, _ = _trainer()
    with pytest.raises(TypeError, match=rf"create_scheduler_fn returned {received}") as info:
        trainer.train(_data(), num_epochs=1, per_device_batch_size=4, create_scheduler_fn=fn)
    assert "return" in str(info.value) and "create_scheduler_fn=None" in str(info.value)
    assert trainer.state.global_step == 0


def test_a_scheduler_fn_that_returns_its_scheduler_trains_with_it() -> None:
    trainer, optimizer = _trainer()
    trainer.train(
        _data(),
        num_epochs=1,
        per_device_batch_size=4,
        create_scheduler_fn=lambda opt: torch.optim.lr_scheduler.StepLR(
            opt, step_size=1, gamma=0.5
        ),
    )
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.025)
