"""A run that early stopping ended, run again with ``resume_from="auto"`` (the same command
after a crash in the code after ``train()``, or a requeue): the rerun must not train on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import EarlyStoppingCallback, SaveTrainingStateCallback, TrainerCallback

# The score each epoch records: best at epoch 2, then two epochs without improvement.
SCORES = [1.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1]


class Score(TrainerCallback):
    """Records ``score`` (one value of SCORES per epoch) before early stopping judges it."""

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        trainer.run_history.update_metric("score", SCORES[trainer.state.epoch])


def train_again_or_anew(ckpt: Path, callbacks: list[TrainerCallback], num_epochs: int) -> Trainer:
    """A seeded 4-2 linear classifier on 16 samples, 4 per batch, trained with ``callbacks``
    and an epoch-end SaveTrainingStateCallback into ``ckpt``, resumed from it if it holds
    a checkpoint (``resume_from="auto"``)."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g))
    trainer = Trainer(
        model,
        nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[*callbacks, SaveTrainingStateCallback(ckpt, every_n_epochs=1)],
        seed=0,
    )
    trainer.train(data, num_epochs=num_epochs, per_device_batch_size=4, resume_from="auto")
    return trainer


def run(ckpt: Path) -> Trainer:
    stopper = EarlyStoppingCallback(
        early_stopping_patience=2, early_stopping_threshold=0.0, watch_metric="score"
    )
    return train_again_or_anew(ckpt, [Score(), stopper], len(SCORES))


def test_rerunning_an_early_stopped_run_trains_no_further(tmp_path: Path) -> None:
    first = run(tmp_path / "ckpt")
    assert first.state.global_step == 4 * 4  # stopped after epoch 4 of 8
    weights = {k: v.clone() for k, v in first.model.state_dict().items()}

    rerun = run(tmp_path / "ckpt")

    assert rerun.state.global_step == 4 * 4, "the rerun trained on past the early stop"
    assert rerun.stop_reason is not None and "early stop" in str(rerun.stop_reason).lower()
    for name, value in rerun.model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    assert rerun.run_history.get_metric_values("score") == SCORES[:4]
