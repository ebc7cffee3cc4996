"""Evaluating during training does not change what training computes."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer


def _trained_weights(with_eval: bool, num_workers: int = 0) -> torch.Tensor:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.Linear(16, 1))
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
    data = TensorDataset(x, x.sum(dim=1, keepdim=True))
    trainer = Trainer(
        model,
        loss_func=nn.MSELoss(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.05),
        callbacks=(),
        seed=1,
    )
    trainer.train(
        data,
        eval_dataset=data if with_eval else None,
        num_epochs=3,
        per_device_batch_size=16,
        eval_dataloader_kwargs={"num_workers": num_workers},
    )
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.parametrize("num_workers", [0, 1])
def test_an_eval_dataset_leaves_the_trained_weights_unchanged(num_workers: int) -> None:
    # Before: each evaluation's DataLoader drew its seed from the global generator, which
    # moved the dropout masks of every later epoch: weights 0.17 apart with and without.
    without = _trained_weights(with_eval=False)
    assert torch.equal(_trained_weights(with_eval=True, num_workers=num_workers), without)
