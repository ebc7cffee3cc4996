"""A train() rerun after a failed one (an out-of-memory backward, Ctrl-C) starts clean."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer

from scramjet.callbacks import TrainerCallback


class _FailingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("out of memory (simulated in backward)")


class FailsInBackwardOnce(TinyMLP):
    def __init__(self) -> None:
        super().__init__()
        self.fail_next = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        if self.fail_next:
            self.fail_next = False
            return _FailingBackward.apply(out)
        return out


class EndsTheFirstEpochEarly(TrainerCallback):
    """Ends the epoch at its first batch, the first time only."""

    def __init__(self) -> None:
        self.armed = True

    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if self.armed:
            self.armed = False
            trainer.end_epoch()


def test_a_rerun_after_a_crash_runs_every_batch_of_its_first_epoch() -> None:
    model = FailsInBackwardOnce()
    trainer = make_trainer(model, callbacks=[EndsTheFirstEpochEarly()])
    with pytest.raises(RuntimeError, match="out of memory"):
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4)
    assert trainer.current_dataloader is None  # nothing is being iterated any more
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4)
    assert trainer.state.samples_seen == 16
    assert trainer.state.global_step == 4


def test_trainer_log_after_a_crashed_run_goes_to_the_run_history() -> None:
    trainer = make_trainer(FailsInBackwardOnce())
    with pytest.raises(RuntimeError, match="out of memory"):
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4)
    trainer.log("test_accuracy", 0.5)
    assert trainer.run_history.get_latest_metric("test_accuracy") == 0.5
