"""A collate_fn given for evaluation in the loader kwargs batches the evaluation, where the
training collate carried over from train() used to win (a mixup or masking collate then
batched every evaluation and prediction: a wrong eval_loss_epoch, silently)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset, default_collate

from scramjet import Trainer


def _masked(samples):  # a training-only collate: the inputs zeroed
    x, y = default_collate(samples)
    return torch.zeros_like(x), y


def test_eval_kwargs_collate_is_used_inside_and_after_train() -> None:
    torch.manual_seed(0)
    x, y = torch.randn(12, 4), torch.randn(12, 1)
    data = TensorDataset(x, y)
    model = nn.Linear(4, 1)
    trainer = Trainer(
        model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    plain = {"collate_fn": default_collate}
    trainer.train(data, 1, eval_dataset=data, per_device_batch_size=4, collate_fn=_masked,
                  eval_dataloader_kwargs=plain)  # fmt: skip
    with torch.no_grad():
        true_loss = nn.functional.mse_loss(model(x), y).item()
        masked_loss = nn.functional.mse_loss(model(torch.zeros_like(x)), y).item()
    assert abs(true_loss - masked_loss) > 1e-3  # the two collates give different losses
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(true_loss)
    trainer.evaluate(data, per_device_batch_size=4, dataloader_kwargs=plain)
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(true_loss)
    outputs = trainer.predict(data, per_device_batch_size=4, dataloader_kwargs=plain)
    torch.testing.assert_close(outputs, model(x).detach())
    # Without kwargs, the training collate still batches them (as documented); an explicit
    # collate_fn argument wins over the kwargs' one.
    trainer.evaluate(data, per_device_batch_size=4)
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(masked_loss)
    trainer.evaluate(data, per_device_batch_size=4, dataloader_kwargs=plain, collate_fn=_masked)
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(masked_loss)
