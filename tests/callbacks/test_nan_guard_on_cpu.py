"""The NaN guard on the CPU, where reading a loss costs no device synchronisation: it
stops at the first non-finite loss, before that batch's update, so the weights a user
(or a checkpoint) keeps after the stop hold no NaN."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch.utils.data import TensorDataset

from scramjet.callbacks import (
    SaveTrainingStateCallback,
    TerminateOnNaNCallback,
    TrainingNaNError,
)
from scramjet.checkpoint import read_checkpoint


def _nan_in_batch_3() -> TensorDataset:
    x, y = blobs(n=40).tensors
    x = x.clone()
    x[9, 0] = float("nan")  # batches of 4: sample 9 is in batch 3
    return TensorDataset(x, y)


def test_the_default_guard_on_cpu_stops_before_the_nan_update() -> None:
    model = TinyMLP()
    trainer = make_trainer(model, callbacks=[TerminateOnNaNCallback()])
    with pytest.raises(TrainingNaNError, match=r"batch 3 of epoch 1 \(after 2 optimizer steps\)"):
        trainer.train(
            _nan_in_batch_3(), num_epochs=1, per_device_batch_size=4,
            train_dataloader_kwargs={"shuffle": False},
        )  # fmt: skip
    assert trainer.state.global_step == 2, "no update after the NaN batch"
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_no_checkpoint_holds_nan_weights_the_guard_did_not_report(tmp_path: Path) -> None:
    saver = SaveTrainingStateCallback(
        tmp_path, every_n_steps=1, every_n_epochs=None, keep_last=None, save_on_preemption=False
    )
    trainer = make_trainer(TinyMLP(), callbacks=[TerminateOnNaNCallback(), saver])
    with pytest.raises(TrainingNaNError):
        trainer.train(
            _nan_in_batch_3(), num_epochs=1, per_device_batch_size=4,
            train_dataloader_kwargs={"shuffle": False},
        )  # fmt: skip
    files = sorted(tmp_path.glob("*.pt"))
    assert len(files) == 2, files
    for path in files:
        weights = read_checkpoint(path)["state"]["model"]
        assert all(bool(torch.isfinite(v).all()) for v in weights.values()), path.name


def test_an_explicit_group_size_is_kept_on_cpu() -> None:
    # check_every=4 given by the user: one check per 4 batches, the NaN found after batch 4.
    trainer = make_trainer(TinyMLP(), callbacks=[TerminateOnNaNCallback(check_every=4)])
    with pytest.raises(TrainingNaNError, match=r"batch 3 of epoch 1 \(after 2 optimizer steps\)"):
        trainer.train(
            _nan_in_batch_3(), num_epochs=1, per_device_batch_size=4,
            train_dataloader_kwargs={"shuffle": False},
        )  # fmt: skip
    assert trainer.state.global_step == 3
