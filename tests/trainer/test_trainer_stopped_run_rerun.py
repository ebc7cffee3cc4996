"""A run that ``trainer.stop_training()`` ended (a callback saw its target reached), run
again with the same arguments and ``resume_from="auto"`` (the same command after a crash in
the code after ``train()``, or a requeue): the rerun must not train on. Asking for more
epochs than the stopped run had planned trains on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tests.resume.test_early_stopped_run_rerun import train_again_or_anew
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback

STOP_AFTER_EPOCHS = 3
PLANNED_EPOCHS = 8
BATCHES_PER_EPOCH = 4


class StopAtTarget(TrainerCallback):
    """Stops the run once it has trained STOP_AFTER_EPOCHS epochs (a target reached)."""

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.epoch + 1 >= STOP_AFTER_EPOCHS:
            trainer.stop_training()


class MidEpochStop(TrainerCallback):
    """Stops the run inside its second epoch."""

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == BATCHES_PER_EPOCH + 2:
            trainer.stop_training()


def run(ckpt: Path, stopper: TrainerCallback, num_epochs: int = PLANNED_EPOCHS) -> Trainer:
    return train_again_or_anew(ckpt, [stopper], num_epochs)


def test_rerunning_a_stopped_run_trains_no_further(tmp_path: Path) -> None:
    first = run(tmp_path / "ckpt", StopAtTarget())
    stopped_at = STOP_AFTER_EPOCHS * BATCHES_PER_EPOCH
    assert first.state.global_step == stopped_at
    weights = {k: v.clone() for k, v in first.model.state_dict().items()}

    rerun = run(tmp_path / "ckpt", StopAtTarget())

    assert rerun.state.global_step == stopped_at, "the rerun trained on past the stop"
    assert rerun.stop_reason is not None and "stop_training" in str(rerun.stop_reason)
    for name, value in rerun.model.state_dict().items():
        assert torch.equal(value, weights[name]), name


def test_rerunning_a_run_stopped_mid_epoch_trains_no_further(tmp_path: Path) -> None:
    first = run(tmp_path / "ckpt", MidEpochStop())
    stopped_at = first.state.global_step
    assert BATCHES_PER_EPOCH < stopped_at < 2 * BATCHES_PER_EPOCH

    rerun = run(tmp_path / "ckpt", MidEpochStop())

    assert rerun.state.global_step == stopped_at, "the rerun trained on"
    assert rerun.stop_reason is not None


def test_asking_for_more_epochs_than_planned_trains_on(tmp_path: Path) -> None:
    run(tmp_path / "ckpt", StopAtTarget())

    class Never(TrainerCallback):
        pass

    longer = run(tmp_path / "ckpt", Never(), num_epochs=PLANNED_EPOCHS + 1)

    assert longer.stop_reason is None
    assert longer.state.global_step == (PLANNED_EPOCHS + 1) * BATCHES_PER_EPOCH


def test_resuming_from_a_named_checkpoint_continues_the_stopped_run(tmp_path: Path) -> None:
    first = run(tmp_path / "ckpt", StopAtTarget())
    assert (
        first.stop_reason is None and first.state.global_step < PLANNED_EPOCHS * BATCHES_PER_EPOCH
    )
    path = tmp_path / "ckpt"  # the folder: its newest checkpoint
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(16, 4, generator=g), torch.randint(0, 2, (16,), generator=g))
    trainer = Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1))

    trainer.train(data, num_epochs=PLANNED_EPOCHS, per_device_batch_size=4, resume_from=path)

    assert trainer.stop_reason is None
    assert trainer.state.global_step == PLANNED_EPOCHS * BATCHES_PER_EPOCH
