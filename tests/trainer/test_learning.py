"""The Trainer learns, records per-sample epoch losses, evaluates and predicts in order."""

from __future__ import annotations

import pytest
import torch
from tests.common.world import (
    StepRecorder,
    TinyMLP,
    accuracy,
    blobs,
    dataset_loss,
    make_trainer,
)
from torch import nn
from torch.utils.data import TensorDataset


def test_learns_a_synthetic_task() -> None:
    train, val = blobs(n=240, seed=0), blobs(n=90, seed=0, spread=0.6)
    model = TinyMLP()
    before = dataset_loss(model, val)
    trainer = make_trainer(model, lr=0.2, seed=0)
    trainer.train(train, num_epochs=6, per_device_batch_size=16, eval_dataset=val)
    losses = trainer.run_history.get_metric_values("train_loss_epoch")
    evals = trainer.run_history.get_metric_values("eval_loss_epoch")
    assert len(losses) == len(evals) == 6
    assert before > 0.9
    assert evals[-1] < 0.15 < before
    assert losses[-1] < losses[0] / 3
    assert accuracy(model, val) >= 0.95


def test_epoch_losses_are_per_sample_means() -> None:
    """With lr=0 the weights stay fixed, so the epoch mean is the whole-dataset mean loss.

    30 samples in batches of 8 (8, 8, 8, 6) and accumulation over 3 batches: the recorded
    value is neither a mean of batch means nor divided by the accumulation steps.
    """
    train, val = blobs(n=30, seed=2), blobs(n=7, seed=3)
    model = TinyMLP()
    trainer = make_trainer(model, lr=0.0)
    trainer.train(
        train,
        num_epochs=1,
        per_device_batch_size=8,
        eval_dataset=val,
        gradient_accumulation_steps=3,
        eval_per_device_batch_size=3,
    )
    train_loss = trainer.run_history.get_latest_metric("train_loss_epoch")
    eval_loss = trainer.run_history.get_latest_metric("eval_loss_epoch")
    assert train_loss == pytest.approx(dataset_loss(model, train), rel=1e-5)
    assert eval_loss == pytest.approx(dataset_loss(model, val), rel=1e-5)
    # A mean of batch means would differ here (the last batch is smaller).
    x, y = train.tensors
    with torch.no_grad():
        batch_means = [
            float(nn.functional.cross_entropy(model(x[i : i + 8]), y[i : i + 8]))
            for i in range(0, 30, 8)
        ]
    assert abs(sum(batch_means) / 4 - train_loss) > 1e-4


def test_train_loss_matches_hand_computation_while_learning() -> None:
    """Batch losses weighted by batch size (hand-computed) give ``train_loss_epoch``."""
    recorder = StepRecorder()
    trainer = make_trainer(TinyMLP(), lr=0.3, callbacks=[recorder], seed=1)
    trainer.train(blobs(n=21), num_epochs=2, per_device_batch_size=4, gradient_accumulation_steps=2)
    per_epoch = [recorder.losses[:6], recorder.losses[6:]]
    expected = [sum(loss * n for loss, n in ep) / sum(n for _, n in ep) for ep in per_epoch]
    assert [n for _, n in per_epoch[0]] == [4, 4, 4, 4, 4, 1]
    got = trainer.run_history.get_metric_values("train_loss_epoch")
    assert got == pytest.approx(expected, rel=1e-5)


def test_evaluate_records_eval_loss(tiny_model: nn.Module, blobs_data: TensorDataset) -> None:
    model, data = tiny_model, blobs_data  # 96 samples: batches of 10 leave a last one of 6
    trainer = make_trainer(model)
    trainer.evaluate(data, per_device_batch_size=10)
    assert trainer.run_history.get_metric_values("eval_loss_epoch") == pytest.approx(
        [dataset_loss(model, data)], rel=1e-5
    )
    assert "train_loss_epoch" not in trainer.run_history.get_metric_names()


def test_predict_returns_outputs_in_dataset_order() -> None:
    model, data = TinyMLP(), blobs(n=23, seed=5)
    trainer = make_trainer(model)
    trainer.train(data, num_epochs=1, per_device_batch_size=4)  # shuffled training first
    model.train()
    preds = trainer.predict(data, per_device_batch_size=5)
    assert model.training, "predict() restores the model's mode"
    with torch.no_grad():
        expected = model(data.tensors[0])
    assert preds.shape == (23, 3)
    torch.testing.assert_close(preds, expected)


def test_max_num_train_steps_counts_updates() -> None:
    trainer = make_trainer(TinyMLP())
    # 10 batches per epoch in windows of 3, 3, 3, 1: 4 updates per epoch.
    trainer.train(
        blobs(n=40),
        num_epochs=10,
        per_device_batch_size=4,
        max_num_train_steps=5,
        gradient_accumulation_steps=3,
    )
    assert trainer.state.global_step == 5
    assert trainer.state.samples_seen == 40 + 3 * 4
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 2


def test_max_num_train_steps_overrides_num_epochs() -> None:
    """As in pytorch-accelerated: the step budget sets the run's length, not just a cap."""
    trainer = make_trainer(TinyMLP())
    # 4 batches (updates) per epoch: 10 updates need 3 epochs, the last one cut short.
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4, max_num_train_steps=10)
    assert trainer.state.global_step == 10
    assert trainer.run_config is not None
    assert trainer.run_config.num_epochs == 3 and trainer.run_config.total_update_steps == 10
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 3


def test_second_train_call_resets_history_unless_asked() -> None:
    trainer = make_trainer(TinyMLP())
    data = blobs(n=16)
    trainer.train(data, num_epochs=2, per_device_batch_size=8)
    trainer.train(data, num_epochs=1, per_device_batch_size=8)
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 1
    trainer.train(data, num_epochs=2, per_device_batch_size=8, reset_run_history=False)
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 3
