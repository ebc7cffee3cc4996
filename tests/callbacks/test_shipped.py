"""Every callback the package ships constructs, survives two train() calls and round-trips its state.

"Ships" means every ``TrainerCallback`` subclass defined anywhere in ``scramjet``, private
ones included: they are found by importing every module of the package, so a new
callback without a factory below fails :func:`test_every_callback_in_the_package_is_covered`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch.utils.data import DataLoader

import scramjet
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
from scramjet.compat.aitoolbox import AbstractCallback, ClassificationResultPackage, TrainLoop
from scramjet.compat.aitoolbox.nlp.experiment_evaluation.attention_heatmap import (
    AttentionHeatmapCallback,
)
from scramjet.compat.aitoolbox.torchtrain.train_loop._trainer import LoopEvents
from scramjet.compat.aitoolbox.tracked import TrainLoopEndSave
from scramjet.compat.aitoolbox.train_loop import _EndEvaluation
from scramjet.compat.nebulae import DashBoard
from scramjet.compat.pytorch_accelerated import Trainer as PaTrainer
from scramjet.compat.pytorch_accelerated import callbacks as pa_callbacks
from scramjet.compat.pytorch_accelerated.schedulers import WSDLrScheduler
from scramjet.compat.pytorch_accelerated.trainer import _AdvanceEpoch
from scramjet.dashboard import Dashboard
from scramjet.demo.run import EpochTimer
from scramjet.tracking import Experiment

#: Modules whose import may fail only because an optional extra is not installed:
#: ``{module: top-level package it needs}``. Optional dependencies are imported lazily
#: inside their backends, so today every module imports without them; a module that
#: starts needing an extra at import time must be listed here, never skipped silently.
OPTIONAL_IMPORTS: dict[str, str] = {}


def _tmp_dashboard(cls: type[Dashboard]) -> Callable[[Path], TrainerCallback]:
    def make(tmp: Path) -> TrainerCallback:
        return cls(
            log_path=str(tmp / "aerolog"),
            file=io.StringIO(),
            force_terminal=False,
            show_memory=False,
        )

    return make


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
    Dashboard: _tmp_dashboard(Dashboard),
    DashBoard: _tmp_dashboard(DashBoard),
    EpochTimer: lambda tmp: EpochTimer(),
    pa_callbacks.SaveBestModelCallback: lambda tmp: pa_callbacks.SaveBestModelCallback(
        tmp / "pa_best.pt"
    ),
    pa_callbacks.ModelEmaCallback: lambda tmp: pa_callbacks.ModelEmaCallback(
        decay=0.9, save_path=tmp / "pa_ema.pt"
    ),
    pa_callbacks.LimitEvalStepsCallback: lambda tmp: pa_callbacks.LimitEvalStepsCallback(
        1, limit_intermediate_only=True
    ),
    pa_callbacks.SaveTrainingStateCallback: lambda tmp: pa_callbacks.SaveTrainingStateCallback(
        tmp / "pa_states", save_every_n_steps=2, max_checkpoints=2
    ),
    pa_callbacks.WSDCheckpointCallback: lambda tmp: pa_callbacks.WSDCheckpointCallback(
        tmp / "pa_wsd"
    ),
    pa_callbacks.LogMetricsCallback: lambda tmp: pa_callbacks.LogMetricsCallback(
        file=io.StringIO()
    ),
    pa_callbacks.EarlyStoppingCallback: lambda tmp: pa_callbacks.EarlyStoppingCallback(
        early_stopping_patience=1
    ),
    pa_callbacks.TerminateOnNaNCallback: lambda tmp: pa_callbacks.TerminateOnNaNCallback(),
    # TinyMLP's class probabilities stand in for a one-step attention over three "tokens".
    AttentionHeatmapCallback: lambda tmp: AttentionHeatmapCallback(
        lambda model, batch: (
            torch.softmax(model(batch[0]), -1)[:, None, :],
            [["c0", "c1", "c2"]] * len(batch[0]),
            [["p"]] * len(batch[0]),
        ),
        output_dir=tmp / "heatmaps",
        max_examples=2,
    ),
    Experiment: lambda tmp: Experiment(
        "shipped", "callback", root=tmp / "runs", save_script=False, sync_every_s=0
    ),
}

#: Callbacks written for another Trainer class (pytorch-accelerated's names: its
#: ``save_checkpoint(save_scheduler=)``, ``save_training_state``) and the ``train()``
#: arguments they need; the others run in scramjet's Trainer with no extra argument.
TRAINER_FOR: dict[type[TrainerCallback], tuple[type[Any], dict[str, Any]]] = {
    pa_callbacks.SaveBestModelCallback: (PaTrainer, {}),
    pa_callbacks.ModelEmaCallback: (PaTrainer, {}),
    pa_callbacks.SaveTrainingStateCallback: (PaTrainer, {}),
    pa_callbacks.WSDCheckpointCallback: (
        PaTrainer,
        {"create_scheduler_fn": WSDLrScheduler.create_scheduler_fn(num_checkpoints=2)},
    ),
}

#: Callbacks that only exist inside the object that owns them, tested there below.
#: ``_EndEvaluation`` reads its TrainLoop's result packages and model, so it is only
#: meaningful in the Trainer that TrainLoop.fit builds.
#: ``LoopEvents`` turns the Trainer's events into a TrainLoop's counters and hooks.
#: ``_AdvanceEpoch`` advances a user-defined RunHistory that only the pytorch-accelerated
#: compat Trainer accepts (tested in tests/compat_pytorch_accelerated).
OWNED_BY_LOOP: set[type[TrainerCallback]] = {_EndEvaluation, LoopEvents, _AdvanceEpoch}


@functools.cache
def _package_callbacks() -> frozenset[type[TrainerCallback]]:
    """Import every module of ``scramjet`` and collect the TrainerCallback subclasses."""
    failed: list[str] = []
    names = [m.name for m in pkgutil.walk_packages(scramjet.__path__, "scramjet.", failed.append)]
    assert not failed, f"packages that could not be imported while walking: {failed}"
    found: set[type[TrainerCallback]] = set()
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            needed = OPTIONAL_IMPORTS.get(name)
            if needed is None or (exc.name or "").split(".")[0] != needed:
                raise
            continue  # listed: an optional extra that is not installed here
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, TrainerCallback)
                and obj is not TrainerCallback
                and obj.__module__.startswith("scramjet.")
            ):
                found.add(obj)
    return frozenset(found)


def test_optional_import_list_names_real_modules() -> None:
    names = {m.name for m in pkgutil.walk_packages(scramjet.__path__, "scramjet.")}
    assert set(OPTIONAL_IMPORTS) <= names


def test_every_callback_in_the_package_is_covered() -> None:
    discovered = _package_callbacks()
    # The discovery itself works: it sees private, compat and tracking callbacks.
    assert {_EndEvaluation, Experiment, Dashboard, LogMetricsCallback} <= discovered
    assert discovered == set(FACTORIES) | OWNED_BY_LOOP, (
        "give every TrainerCallback subclass in scramjet a factory in FACTORIES "
        "(or a test inside the object that owns it)"
    )
    assert not set(FACTORIES) & OWNED_BY_LOOP


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _round_trip(state: dict[str, Any], fresh: TrainerCallback) -> None:
    """``state`` is storable in a checkpoint and ``fresh`` gives it back unchanged."""
    buffer = io.BytesIO()
    torch.save(state, buffer)  # plain values and tensors only
    buffer.seek(0)
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert _equal(fresh.state_dict(), state), (fresh.state_dict(), state)


@pytest.mark.parametrize("cls", list(FACTORIES), ids=lambda c: c.__name__)
def test_shipped_callback_survives_two_runs_and_round_trips(
    cls: type[TrainerCallback], tmp_path: Path
) -> None:
    callback = FACTORIES[cls](tmp_path)
    assert type(callback) is cls
    trainer_cls, extra = TRAINER_FOR.get(cls, (scramjet.Trainer, {}))
    trainer = make_trainer(TinyMLP(), callbacks=[callback], trainer_cls=trainer_cls)
    train, val = blobs(n=24), blobs(n=9, seed=1)
    for _ in range(2):
        trainer.train(train, num_epochs=2, per_device_batch_size=4, eval_dataset=val, **extra)
        assert trainer.run_history.get_metric_values("train_loss_epoch")
    state = callback.state_dict()
    if type(callback).state_dict is not TrainerCallback.state_dict:
        assert state, f"{cls.__name__} keeps resume state but returned none after two runs"
    _round_trip(state, FACTORIES[cls](tmp_path))
    # And a restored callback keeps working in a new run.
    fresh = FACTORIES[cls](tmp_path)
    fresh.load_state_dict(state)
    trainer2 = make_trainer(TinyMLP(), callbacks=[fresh], trainer_cls=trainer_cls)
    continues_a_folder = cls is Experiment  # the restored state names the earlier run folder
    with (
        pytest.warns(UserWarning, match="without a checkpoint to restore")
        if continues_a_folder
        else contextlib.nullcontext()
    ):
        trainer2.train(train, num_epochs=1, per_device_batch_size=4, eval_dataset=val, **extra)


def test_end_evaluation_inside_its_train_loop(tmp_path: Path) -> None:
    # _EndEvaluation is added by TrainLoop.fit when the loop has result packages; its
    # results come from the loop's model and validation loader.
    model = TinyMLP()
    loop = TrainLoopEndSave(
        model,
        DataLoader(blobs(n=24), batch_size=4, shuffle=True),
        DataLoader(blobs(n=9, seed=1), batch_size=4),
        None,
        torch.optim.SGD(model.parameters(), lr=0.1),
        torch.nn.CrossEntropyLoss(),
        "shipped",
        "end_eval",
        tmp_path / "runs",
        {"lr": 0.1},
        val_result_package=ClassificationResultPackage(),
    )
    for _ in range(2):
        loop.fit(num_epochs=1)
        assert loop.trainer is not None
        (end,) = [cb for cb in loop.trainer.callbacks if isinstance(cb, _EndEvaluation)]
        assert 0.0 <= end.results["val"]["accuracy"] <= 1.0
    _round_trip(end.state_dict(), _EndEvaluation(loop))


class _CountEpochs(AbstractCallback):
    def __init__(self) -> None:
        super().__init__("count epochs")
        self.epochs = 0

    def on_epoch_end(self) -> None:
        self.epochs += 1


def test_aitoolbox_adapters_inside_their_train_loop() -> None:
    # AIToolbox-style callbacks run from the loop's CallbacksHandler, called by the one
    # LoopEvents TrainerCallback that TrainLoop.fit gives its Trainer.
    model = TinyMLP()
    counter = _CountEpochs()
    loop = TrainLoop(
        model,
        DataLoader(blobs(n=24), batch_size=4, shuffle=True),
        DataLoader(blobs(n=9, seed=1), batch_size=4),
        None,
        torch.optim.SGD(model.parameters(), lr=0.1),
        torch.nn.CrossEntropyLoss(),
    )
    for _ in range(2):
        loop.fit(num_epochs=2, callbacks=[counter])
        assert loop.trainer is not None
        (adapter,) = [cb for cb in loop.trainer.callbacks if isinstance(cb, LoopEvents)]
        assert adapter.loop is loop and loop.callbacks == [counter]
    # As in AIToolbox, fit trains epochs loop.epoch..num_epochs-1 and leaves loop.epoch at
    # the last one: 2 epochs, then 1.
    assert counter.epochs == 3 and loop.epoch == 1
    _round_trip(adapter.state_dict(), LoopEvents(loop))
