"""An evaluation stream that yields no batch names drop_last when that is the cause (a
stream shorter than one batch), and the stream's own class."""

from __future__ import annotations

import warnings

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
    trainer = Trainer(
        model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    with pytest.raises(ValueError, match=r"over Short, of unknown length\) yielded no batch.*"
                       r"drop_last=True.*pass drop_last=False or a smaller batch size"):  # fmt: skip
        trainer.evaluate(Short(), per_device_batch_size=50, dataloader_kwargs={"drop_last": True})
    trainer.evaluate(Short(), per_device_batch_size=50)  # without drop_last: one short batch
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") > 0


class Numbered(IterableDataset):
    """0..11, each worker reading every other batch of 2 (a common sharding)."""

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        for i in range(12):
            if (i // 2) % workers == worker:
                yield torch.tensor([float(i)])


def test_predicting_a_stream_with_several_workers_says_the_order_is_interleaved() -> None:
    model = nn.Linear(1, 1)
    with torch.no_grad():  # outputs = inputs
        model.weight.fill_(1.0)
        model.bias.zero_()
    trainer = Trainer(
        model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=[]
    )
    with pytest.warns(UserWarning, match=r"stream Numbered with 2 worker processes.*interleaved"):
        out = trainer.predict(
            Numbered(), per_device_batch_size=2, dataloader_kwargs={"num_workers": 2}
        )
    assert sorted(out.flatten().tolist()) == [float(i) for i in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ordered = trainer.predict(Numbered(), per_device_batch_size=2)
    assert ordered.flatten().tolist() == [float(i) for i in range(12)]
