"""The metrics a checkpoint carries are those measured on its own weights: a mid-epoch
save is not ranked by the evaluation of the epoch before, and an epoch's last update is
saved once (after the evaluation), not twice at the same step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback
from scramjet.checkpoint import CheckpointManager


def _data(seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(40, 4, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def _train(directory: Path, epochs: int = 3, resume: bool = False, **options: object) -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    saver = SaveTrainingStateCallback(directory, async_write=False, **options)  # type: ignore[arg-type]
    trainer = Trainer(
        model,
        loss_func=nn.CrossEntropyLoss(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        callbacks=[saver],
    )
    trainer.train(
        _data(0),
        eval_dataset=_data(1),
        num_epochs=epochs,
        per_device_batch_size=4,  # 10 updates an epoch
        resume_from=directory if resume else None,
    )
    return trainer


def _saved(directory: Path) -> list[tuple[int, int | None, dict[str, float]]]:
    found = CheckpointManager(directory).checkpoints()
    return [(c.step, c.epoch, dict(c.metrics)) for c in found]


def test_a_mid_epoch_checkpoint_carries_no_evaluation_of_other_weights(tmp_path: Path) -> None:
    trainer = _train(tmp_path, every_n_steps=5, keep_last=10)
    evals = trainer.run_history.get_metric_values("eval_loss_epoch")
    saved = _saved(tmp_path)
    assert [s[0] for s in saved] == [5, 10, 15, 20, 25, 30]
    mid = [metrics for step, _, metrics in saved if step % 10]
    assert mid == [{}, {}, {}]
    ends = [metrics["eval_loss_epoch"] for step, _, metrics in saved if not step % 10]
    assert ends == pytest.approx(evals)


def test_keep_best_loads_the_weights_the_best_evaluation_was_measured_on(
    tmp_path: Path,
) -> None:
    trainer = _train(tmp_path, every_n_steps=5, keep_last=1, keep_best=1, monitor="eval_loss_epoch")
    evals = trainer.run_history.get_metric_values("eval_loss_epoch")
    best = CheckpointManager(tmp_path, monitor="eval_loss_epoch").load(which="best")
    assert best.metrics["eval_loss_epoch"] == pytest.approx(min(evals))
    assert best.step == 10 * (evals.index(min(evals)) + 1)


def test_the_epochs_last_update_is_saved_once_when_the_epoch_end_saves(tmp_path: Path) -> None:
    _train(tmp_path, every_n_steps=10, keep_last=10)
    steps = [s[0] for s in _saved(tmp_path)]
    assert steps == [10, 20, 30]
    # without an epoch-end save, the step save is the only one and is kept
    _train(tmp_path / "steps", every_n_steps=10, every_n_epochs=None, keep_last=10)
    assert [s[0] for s in _saved(tmp_path / "steps")] == [10, 20, 30]


def test_a_resumed_run_keeps_knowing_which_weights_each_value_was_measured_on(
    tmp_path: Path,
) -> None:
    _train(tmp_path, epochs=1, every_n_steps=5, keep_last=10)
    _train(tmp_path, epochs=2, resume=True, every_n_steps=5, keep_last=10)
    saved = _saved(tmp_path)
    assert [s[0] for s in saved] == [5, 10, 15, 20]
    assert saved[2][2] == {}  # step 15: epoch 1's evaluation is of step 10's weights
    assert set(saved[3][2]) == {"eval_loss_epoch", "train_loss_epoch"}
