"""More of the mistakes everyone makes, in less common settings: the error comes early,
names what was received and how to fix it, and no sample is lost in silence."""

from __future__ import annotations

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet.callbacks import TrainerCallback


class _CountSteps(TrainerCallback):
    def __init__(self) -> None:
        self.steps = 0

    def on_train_step_end(self, trainer: object, **kwargs: object) -> None:
        self.steps += 1


# ----------------------------------------------------------------------------- drop_last
def test_predict_with_drop_last_refuses_to_leave_samples_out() -> None:
    trainer = make_trainer()
    with pytest.raises(ValueError, match=r"one output per sample.*drop_last=True") as info:
        trainer.predict(blobs(n=5), per_device_batch_size=4, dataloader_kwargs={"drop_last": True})
    assert "drop_last" in str(info.value) and "Leave" in str(info.value)


def test_predict_of_a_ready_loader_with_drop_last_refuses_to_leave_samples_out() -> None:
    loader = DataLoader(blobs(n=5), batch_size=4, drop_last=True)
    with pytest.raises(ValueError, match=r"drop_last=True.*1 sample\(s\).*of 5"):
        make_trainer().predict(loader)


def test_predict_of_a_ready_loader_with_drop_last_that_drops_nothing_is_fine() -> None:
    loader = DataLoader(blobs(n=8), batch_size=4, drop_last=True)
    assert make_trainer().predict(loader).shape == (8, 3)


def test_evaluation_data_that_drop_last_empties_fails_before_the_first_epoch() -> None:
    counter = _CountSteps()
    trainer = make_trainer(callbacks=[counter])
    with pytest.raises(ValueError, match=r"eval.*3 sample\(s\).*batch size is 4.*drop_last"):
        trainer.train(
            blobs(n=16), 1, eval_dataset=blobs(n=3), per_device_batch_size=4,
            eval_dataloader_kwargs={"drop_last": True},
        )  # fmt: skip
    assert counter.steps == 0  # no epoch was spent before the error


def test_evaluate_of_data_that_drop_last_empties_names_the_cause() -> None:
    with pytest.raises(ValueError, match=r"3 sample\(s\).*batch size is 4.*drop_last") as info:
        make_trainer().evaluate(blobs(n=3), 4, dataloader_kwargs={"drop_last": True})
    assert "unknown length" not in str(info.value)
