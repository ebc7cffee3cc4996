"""AIToolbox-style callbacks (``AbstractCallback`` and its hook names) on Trainer events.

Mapping of hooks to :class:`~scramjet.callbacks.Event`:

====================================  =========================================
AIToolbox hook                        Trainer event
====================================  =========================================
``on_train_begin``                    ``on_training_run_start``
``on_epoch_begin``                    ``on_train_epoch_start``
``on_batch_begin``                    ``on_train_step_start``
``on_after_gradient_update``          ``on_after_gradient_update`` (fired by the
                                      TrainLoop's ``clip_gradients`` hook: after
                                      backward, gradients unscaled, before the
                                      optimizer step; once per update)
``on_after_optimizer_step``           ``on_optimizer_step_end``
``on_batch_end``                      ``on_optimizer_step_end`` (once per update)
``on_epoch_end``                      ``on_training_run_epoch_end`` (after validation)
``on_train_end``                      ``on_training_run_end``
====================================  =========================================

:class:`EarlyStopping` and :class:`TerminateOnNaN` are the core's
:class:`~scramjet.callbacks.EarlyStoppingCallback` and
:class:`~scramjet.callbacks.TerminateOnNaNCallback` with AIToolbox's arguments: the Trainer
runs the core callback itself (and saves its state in checkpoints).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from scramjet.callbacks.base import StopTrainingError, TrainerCallback
from scramjet.callbacks.control import EarlyStoppingCallback, TerminateOnNaNCallback

if TYPE_CHECKING:
    from scramjet.compat.aitoolbox.train_loop import TrainLoop
    from scramjet.trainer import Trainer

#: AIToolbox hook → Trainer events that call it.
HOOK_EVENTS: dict[str, tuple[str, ...]] = {
    "on_train_begin": ("on_training_run_start",),
    "on_epoch_begin": ("on_train_epoch_start",),
    "on_batch_begin": ("on_train_step_start",),
    "on_after_gradient_update": ("on_after_gradient_update",),
    "on_after_optimizer_step": ("on_optimizer_step_end",),
    "on_batch_end": ("on_optimizer_step_end",),
    "on_epoch_end": ("on_training_run_epoch_end",),
    "on_train_end": ("on_training_run_end",),
}

#: Run-history name → AIToolbox ``train_history`` name (other metrics keep their names).
HISTORY_NAMES: dict[str, str] = {"train_loss_epoch": "loss", "eval_loss_epoch": "val_loss"}


def history_key(name: str) -> str:
    """The run-history name of an AIToolbox ``train_history`` name (``"val_loss"`` → ``"eval_loss_epoch"``)."""
    return next((key for key, aitb in HISTORY_NAMES.items() if aitb == name), name)


class AbstractCallback:
    """Base class of AIToolbox-style callbacks; override the hooks you need.

    Args:
        callback_name: a name for messages.
        execution_order: callbacks run in increasing order (ties keep list order).
        device_idx_execution: in a distributed run, only this rank runs the callback
            (None: every rank).

    A subclass whose work a core callback does sets :attr:`trainer_callback`; the Trainer
    then runs that callback instead of the AIToolbox hooks.
    """

    trainer_callback: TrainerCallback | None = None

    def __init__(
        self, callback_name: str, execution_order: int = 0, device_idx_execution: int | None = None
    ) -> None:
        self.callback_name = callback_name
        self.execution_order = execution_order
        self.device_idx_execution = device_idx_execution
        self.train_loop_obj: TrainLoop | None = None

    def register_train_loop_object(self, train_loop_obj: TrainLoop) -> AbstractCallback:
        """Attach the TrainLoop (called by ``fit``), then ``on_train_loop_registration``."""
        self.train_loop_obj = train_loop_obj
        self.on_train_loop_registration()
        return self

    def on_train_loop_registration(self) -> None:
        """Called once the TrainLoop is attached."""

    def on_train_begin(self) -> None:
        """Start of training."""

    def on_train_end(self) -> None:
        """End of training."""

    def on_epoch_begin(self) -> None:
        """Start of an epoch."""

    def on_epoch_end(self) -> None:
        """End of an epoch, after validation."""

    def on_batch_begin(self) -> None:
        """Before a batch's loss."""

    def on_batch_end(self) -> None:
        """After a batch's update."""

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """After backward, before the optimizer step (e.g. gradient clipping)."""

    def on_after_optimizer_step(self) -> None:
        """After the optimizer step."""


def to_trainer_callback(callback: AbstractCallback, loop: TrainLoop) -> TrainerCallback:
    """A TrainerCallback that calls ``callback``'s overridden AIToolbox hooks on their events.

    Only the events whose hooks are overridden are defined, so an idle hook costs nothing
    per step. A callback with a :attr:`~AbstractCallback.trainer_callback` gives that one.
    """
    callback.register_train_loop_object(loop)
    if callback.trainer_callback is not None:
        return callback.trainer_callback
    events: dict[str, list[str]] = {}
    for hook, names in HOOK_EVENTS.items():
        if getattr(type(callback), hook) is not getattr(AbstractCallback, hook):
            for event in names:
                events.setdefault(event, []).append(hook)

    def make(hooks: list[str]) -> Any:
        def handler(self: TrainerCallback, trainer: Any, **kwargs: Any) -> None:
            if callback.device_idx_execution is not None and (
                trainer.num_processes > 1
                and torch.distributed.get_rank() != callback.device_idx_execution
            ):
                return
            for hook in hooks:
                getattr(callback, hook)()

        return handler

    attrs: dict[str, Any] = {event: make(hooks) for event, hooks in events.items()}
    attrs["custom_events"] = ("on_after_gradient_update",)
    attrs["wrapped"] = callback
    cls = type(f"AIToolbox{type(callback).__name__}", (TrainerCallback,), attrs)
    adapter: TrainerCallback = cls()
    return adapter


# ------------------------------------------------------------------ basic callbacks
class _EarlyStoppingCallback(EarlyStoppingCallback):
    """The core's early stopping, naming the metric as AIToolbox does when it stops."""

    def __init__(self, monitor: str, **kwargs: Any) -> None:
        super().__init__(watch_metric=history_key(monitor), **kwargs)
        self.monitor = monitor

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """The core's check; its stop message names ``monitor``."""
        try:
            super().on_training_run_epoch_end(trainer, **kwargs)
        except StopTrainingError as stop:
            raise StopTrainingError(str(stop).replace(self.watch_metric, self.monitor)) from None


class EarlyStopping(AbstractCallback):
    """Stops when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs.

    ``monitor`` uses AIToolbox names (``"val_loss"``, ``"loss"``, or a result metric such
    as ``"val_accuracy"``); ``mode`` is inferred (``loss`` → min, else max) unless given.
    The check is :class:`scramjet.callbacks.EarlyStoppingCallback`'s: training stops at
    the end of the first epoch that follows ``patience`` epochs without improvement, and
    the counts are kept in training checkpoints (and across ``fit`` calls).
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int = 0,
        mode: str | None = None,
    ) -> None:
        super().__init__("EarlyStopping")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(
                f"patience must be an int ≥ 0 (epochs without improvement to wait); "
                f"received {patience!r}."
            )
        mode = mode or ("min" if "loss" in monitor else "max")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min', 'max' or None (inferred); received {mode!r}.")
        self.monitor, self.min_delta, self.patience, self.mode = monitor, min_delta, patience, mode
        # AIToolbox stops once the count exceeds patience; the core once it reaches its own.
        self.trainer_callback = self.core = _EarlyStoppingCallback(
            monitor,
            early_stopping_patience=patience + 1,
            early_stopping_threshold=min_delta,
            greater_is_better=mode == "max",
            reset_on_train=False,
        )

    @property
    def best(self) -> float | None:
        """The best value so far."""
        return self.core.best

    @property
    def wait(self) -> int:
        """Epochs since the best value."""
        return self.core.epochs_without_improvement


class TerminateOnNaN(AbstractCallback):
    """Stops training when the monitored value becomes NaN or infinite.

    With ``monitor="loss"`` (the default) this is
    :class:`scramjet.callbacks.TerminateOnNaNCallback`: the training loss of every step
    is checked (in groups, without a device sync per step) and the run stops within the
    epoch; ``fit`` returns normally and ``trainer.stop_reason`` says where it stopped.
    Any other history value is checked at the end of each epoch.
    """

    def __init__(self, monitor: str = "loss") -> None:
        super().__init__("TerminateOnNaN")
        self.monitor = monitor
        if monitor == "loss":
            self.trainer_callback = TerminateOnNaNCallback(raise_error=False)

    def on_epoch_end(self) -> None:
        """Check the latest value of a monitor other than the training loss."""
        assert self.train_loop_obj is not None
        values = self.train_loop_obj.train_history.get(self.monitor, [])
        if values and not math.isfinite(float(values[-1])):
            raise StopTrainingError(f"{self.monitor} is {values[-1]}; training stopped.")


class GradValueClip(AbstractCallback):
    """Clips every gradient element to ``[-max_grad_value, max_grad_value]`` before each update."""

    def __init__(self, max_grad_value: float) -> None:
        super().__init__("GradValueClip")
        self.max_grad_value = max_grad_value

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """Clip."""
        assert self.train_loop_obj is not None
        torch.nn.utils.clip_grad_value_(self.train_loop_obj.model.parameters(), self.max_grad_value)


class GradNormClip(AbstractCallback):
    """Rescales gradients so their total norm is at most ``max_grad_norm`` before each update."""

    def __init__(self, max_grad_norm: float, **kwargs: Any) -> None:
        super().__init__("GradNormClip")
        self.max_grad_norm, self.kwargs = max_grad_norm, kwargs
        self.last_total_norm: float | None = None

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """Clip and remember the norm before clipping."""
        assert self.train_loop_obj is not None
        norm = torch.nn.utils.clip_grad_norm_(
            self.train_loop_obj.model.parameters(), self.max_grad_norm, **self.kwargs
        )
        self.last_total_norm = float(norm)


class GradientStatsPrint(AbstractCallback):
    """Prints mean, std and norm of each parameter's gradient.

    Args:
        model_layers_extract_def: function ``model -> list of modules`` to inspect
            (default: every parameter of the model).
        on_every_grad_update: print at every update instead of only the epoch's last one.
    """

    def __init__(
        self, model_layers_extract_def: Any = None, on_every_grad_update: bool = False
    ) -> None:
        super().__init__("GradientStatsPrint")
        self.extract = model_layers_extract_def
        self.on_every_grad_update = on_every_grad_update
        self.last_stats: dict[str, dict[str, float]] = {}

    def _params(self) -> list[tuple[str, torch.nn.Parameter]]:
        assert self.train_loop_obj is not None
        model = self.train_loop_obj.model
        if self.extract is None:
            return list(model.named_parameters())
        return [
            (f"{i}.{n}", p)
            for i, layer in enumerate(self.extract(model))
            for n, p in layer.named_parameters()
        ]

    def on_after_gradient_update(self, optimizer_idx: int = 0) -> None:
        """Collect statistics (one device sync per parameter, only here)."""
        stats = {}
        for name, p in self._params():
            if p.grad is not None:
                g = p.grad.detach().float()
                stats[name] = {
                    "mean": float(g.mean()),
                    "std": float(g.std()) if g.numel() > 1 else 0.0,
                    "norm": float(g.norm()),
                }
        self.last_stats = stats
        if self.on_every_grad_update:
            self._print()

    def on_epoch_end(self) -> None:
        """Print the last update's statistics."""
        if not self.on_every_grad_update:
            self._print()

    def _print(self) -> None:
        for name, s in self.last_stats.items():
            print(f"grad {name}: mean {s['mean']:.4g} std {s['std']:.4g} norm {s['norm']:.4g}")


def _output_dir(loop: TrainLoop | None, folder: str | os.PathLike[str] | None, sub: str) -> Path:
    if folder is not None:
        path = Path(folder)
    elif loop is not None and loop.experiment is not None:
        path = loop.experiment.start() / sub
    else:
        path = Path(sub)
    path.mkdir(parents=True, exist_ok=True)
    return path


class _EpochOrTrainEnd(AbstractCallback):
    """Runs :meth:`_act` at each epoch end and/or at the end of training, as asked."""

    def __init__(
        self,
        epoch_end: bool = True,
        train_end: bool = False,
        folder: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(type(self).__name__)
        self.epoch_end, self.train_end, self.folder = epoch_end, train_end, folder

    def _act(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_epoch_end(self) -> None:
        """Act if asked."""
        if self.epoch_end:
            self._act()

    def on_train_end(self) -> None:
        """Act if asked."""
        if self.train_end:
            self._act()


class ModelTrainHistoryPlot(_EpochOrTrainEnd):
    """Plots every history metric to ``<folder>/<metric>.png`` (default: the run's ``plots/``).

    Args:
        epoch_end: plot after every epoch.
        train_end: plot at the end of training.
        folder: output folder; default the tracked run's ``plots/`` or ``./plots``.
    """

    written: list[Path]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.written = []

    def _act(self) -> None:
        from scramjet.tracking.report import _plot_lines, _safe, _write

        assert self.train_loop_obj is not None
        out = _output_dir(self.train_loop_obj, self.folder, "plots")
        for name, values in self.train_loop_obj.train_history.items():
            numbers = [float(v) for v in values if isinstance(v, int | float)]
            if numbers:
                xs = list(range(1, len(numbers) + 1))
                self.written.append(
                    _write(
                        out / f"{_safe(name)}.png",
                        _plot_lines(name, [(name, xs, numbers)], "epoch"),
                    )
                )


class ModelTrainHistoryFileWriter(_EpochOrTrainEnd):
    """Appends each epoch's history values to ``<folder>/train_history.jsonl`` and ``.txt``."""

    path: Path | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.path = None

    def _act(self) -> None:
        assert self.train_loop_obj is not None
        out = _output_dir(self.train_loop_obj, self.folder, "results")
        self.path = out / "train_history.jsonl"
        latest = {k: v[-1] for k, v in self.train_loop_obj.train_history.items() if v}
        record = {"epoch": self.train_loop_obj.epoch + 1, **latest}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=float) + "\n")
        with open(out / "train_history.txt", "a", encoding="utf-8") as fh:
            fh.write(" | ".join(f"{k}: {v}" for k, v in record.items()) + "\n")


class TensorBoardFullTracker(AbstractCallback):
    """Writes every history metric per epoch to TensorBoard (``pip install 'scramjet[tensorboard]'``).

    Args:
        log_dir: event folder; default ``<run>/tensorboard`` of the tracked run or
            ``./tensorboard``.
    """

    def __init__(self, log_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        super().__init__("TensorBoardFullTracker")
        self.log_dir = log_dir
        self._writer: Any = None

    def on_train_begin(self) -> None:
        """Open the event file."""
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(
            str(_output_dir(self.train_loop_obj, self.log_dir, "tensorboard"))
        )

    def on_epoch_end(self) -> None:
        """Add the epoch's values."""
        assert self.train_loop_obj is not None and self._writer is not None
        epoch = self.train_loop_obj.epoch + 1
        for name, values in self.train_loop_obj.train_history.items():
            if values and isinstance(values[-1], int | float):
                self._writer.add_scalar(name, float(values[-1]), epoch)

    def on_train_end(self) -> None:
        """Close the event file."""
        if self._writer is not None:
            self._writer.close()


TensorboardFullTracker = TensorBoardFullTracker
