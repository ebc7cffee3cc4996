"""An evaluation stream that yields no batch names drop_last when that is the cause (a
stream shorter than one batch), and the stream's own class."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import IterableDataset

from scramjet import Trainer


class Short(IterableDataset):
    def __iter__(self):
        for _ in range(23):
            yield torch.randn(2), torch.randn(1)


def test_a_stream_shorter_than_a_dropped_batch_names_drop_last() -> None:
    model = nn.Linear(2, 1)
    trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[])
    with pytest.raises(ValueError, match=r"over Short, of unknown length\) yielded no batch.*"
                       r"drop_last=True.*pass drop_last=False or a smaller batch size"):  # fmt: skip
        trainer.evaluate(Short(), per_device_batch_size=50, dataloader_kwargs={"drop_last": True})
    trainer.evaluate(Short(), per_device_batch_size=50)  # without drop_last: one short batch
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") > 0
