"""Every shipped callback constructs, survives two train() calls and round-trips its state."""

from __future__ import annotations

import inspect
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer

import scramjet.callbacks as callbacks_module
from scramjet.callbacks import (
    ConvertSyncBatchNormCallback,
    EarlyStoppingCallback,
    LimitBatchesCallback,
    LimitEvalStepsCallback,
    LogMetricsCallback,
    ModelEmaCallback,
    MoveModulesToDeviceCallback,
    PrintProgressCallback,
    ProgressBarCallback,
    SaveBestModelCallback,
    SaveTrainingStateCallback,
    StepBasedEvaluationCallback,
    TerminateOnNaNCallback,
    TrainerCallback,
)

FACTORIES: dict[type[TrainerCallback], Callable[[Path], TrainerCallback]] = {
    LogMetricsCallback: lambda tmp: LogMetricsCallback(file=io.StringIO()),
    ProgressBarCallback: lambda tmp: ProgressBarCallback(file=io.StringIO(), interval=0.01),
    PrintProgressCallback: lambda tmp: PrintProgressCallback(file=io.StringIO()),
    TerminateOnNaNCallback: lambda tmp: TerminateOnNaNCallback(),
    MoveModulesToDeviceCallback: lambda tmp: MoveModulesToDeviceCallback(),
    SaveBestModelCallback: lambda tmp: SaveBestModelCallback(tmp / "best.pt"),
    EarlyStoppingCallback: lambda tmp: EarlyStoppingCallback(early_stopping_patience=1),
    LimitBatchesCallback: lambda tmp: LimitBatchesCallback(2),
    ModelEmaCallback: lambda tmp: ModelEmaCallback(decay=0.9),
    ConvertSyncBatchNormCallback: lambda tmp: ConvertSyncBatchNormCallback(always=True),
    StepBasedEvaluationCallback: lambda tmp: StepBasedEvaluationCallback(2),
    LimitEvalStepsCallback: lambda tmp: LimitEvalStepsCallback(1),
    SaveTrainingStateCallback: lambda tmp: SaveTrainingStateCallback(tmp / "ckpt", every_n_steps=2),
}


def test_every_exported_callback_is_covered() -> None:
    exported = {
        obj
        for obj in vars(callbacks_module).values()
        if inspect.isclass(obj) and issubclass(obj, TrainerCallback) and obj is not TrainerCallback
    }
    assert exported == set(FACTORIES)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


@pytest.mark.parametrize("cls", list(FACTORIES), ids=lambda c: c.__name__)
def test_shipped_callback_survives_two_runs_and_round_trips(
    cls: type[TrainerCallback], tmp_path: Path
) -> None:
    callback = FACTORIES[cls](tmp_path)
    trainer = make_trainer(TinyMLP(), callbacks=[callback])
    train, val = blobs(n=24), blobs(n=9, seed=1)
    for _ in range(2):
        trainer.train(train, num_epochs=2, per_device_batch_size=4, eval_dataset=val)
        assert trainer.run_history.get_metric_values("train_loss_epoch")
    state = callback.state_dict()
    # Storable in a checkpoint: plain values and tensors only.
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    reloaded = torch.load(buffer, weights_only=True)
    fresh = FACTORIES[cls](tmp_path)
    fresh.load_state_dict(reloaded)
    assert _equal(fresh.state_dict(), state)
    # And the restored callback keeps working in a new run.
    trainer2 = make_trainer(TinyMLP(), callbacks=[fresh])
    trainer2.train(train, num_epochs=1, per_device_batch_size=4, eval_dataset=val)
