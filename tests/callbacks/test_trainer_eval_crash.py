"""A standalone ``evaluate()`` that fails releases what its callbacks started, as ``train()`` does."""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch import nn

from scramjet.callbacks import ProgressBarCallback, TrainerCallback


class FailsOnSecondBatch(TinyMLP):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("the second batch is broken")
        return super().forward(x)


class Closes(TrainerCallback):
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def _progress_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "scramjet-progress" and t.is_alive()]


def test_a_failed_evaluate_stops_the_progress_display() -> None:
    out, closes = io.StringIO(), Closes()
    trainer = make_trainer(
        FailsOnSecondBatch(), callbacks=[ProgressBarCallback(file=out, interval=0.05), closes]
    )
    with pytest.raises(RuntimeError, match="second batch is broken"):
        trainer.evaluate(blobs(n=12), per_device_batch_size=4)
    assert closes.closed == 1
    assert _progress_threads() == []
    printed = out.getvalue()
    threading.Event().wait(0.3)  # a display left running would keep printing lines
    assert out.getvalue() == printed
    assert printed.splitlines()[-1].endswith("ended early")


def test_a_failed_evaluate_inside_train_closes_the_callbacks_once() -> None:
    closes = Closes()

    class EvaluatesOther(TrainerCallback):
        def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
            trainer.unwrapped_model.calls = 1  # the next forward fails
            trainer.evaluate(blobs(n=8), per_device_batch_size=4)

    model = FailsOnSecondBatch()
    model.calls = -100
    trainer = make_trainer(model, callbacks=[EvaluatesOther(), closes], loss=nn.CrossEntropyLoss())
    with pytest.raises(RuntimeError, match="second batch is broken"):
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    assert closes.closed == 1
