"""pytorch-accelerated's callbacks: scramjet's, with the peer's arguments where they differ.

Most callbacks are scramjet's own classes under the peer's names. Adapted here:
:class:`SaveBestModelCallback` (``save_scheduler``), :class:`ModelEmaCallback` (saves the
EMA weights when ``watch_metric`` improves; ``model_ema``, ``callbacks``),
:class:`LimitEvalStepsCallback` (``limit_intermediate_only``),
:class:`TerminateOnNaNCallback` (evaluation losses too; ``triggered``),
:class:`SaveTrainingStateCallback` (``save_dir``, ``save_every_n_epochs``,
``save_every_n_steps``, ``save_at_end``, ``max_checkpoints``), the
:class:`WSDCheckpointCallback` for ``WSDLrScheduler`` runs, and the peer's
:class:`CallbackHandler` methods.
"""

from __future__ import annotations

import datetime
import math
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from scramjet.callbacks import DEFAULT_CALLBACKS as _CORE_DEFAULTS
from scramjet.callbacks import CallbackHandler as _CoreHandler
from scramjet.callbacks import LimitEvalStepsCallback as _CoreLimitEval
from scramjet.callbacks import ModelEmaCallback as _CoreEma
from scramjet.callbacks import SaveBestModelCallback as _CoreSaveBest
from scramjet.callbacks.base import StopTrainingError, TrainerCallback
from scramjet.callbacks.control import EarlyStoppingCallback as _CoreEarlyStopping
from scramjet.callbacks.control import (
    LimitBatchesCallback,
    StepBasedEvaluationCallback,
    TrainingNaNError,
    improved,
)
from scramjet.callbacks.control import TerminateOnNaNCallback as _CoreTerminateOnNaN
from scramjet.callbacks.model import ConvertSyncBatchNormCallback, MoveModulesToDeviceCallback
from scramjet.callbacks.progress import LogMetricsCallback as _CoreLogMetrics
from scramjet.callbacks.progress import PrintProgressCallback, ProgressBarCallback
from scramjet.compat.pytorch_accelerated import _files
from scramjet.compat.pytorch_accelerated.utils import ModelEma

if TYPE_CHECKING:
    from scramjet.compat.pytorch_accelerated.trainer import Trainer as PeerTrainer
    from scramjet.trainer import Trainer


def _peer(trainer: Trainer) -> PeerTrainer:
    """The Trainer as the compat Trainer (these callbacks call its peer methods)."""
    return cast("PeerTrainer", trainer)


class CallbackMethodNotImplementedError(Exception):
    """A callback method the caller needs is not implemented."""


class CallbackHandler(_CoreHandler):
    """scramjet's callback dispatcher with the peer's ``add_callbacks``, ``callback_list``
    and ``clear_callbacks``."""

    def add_callbacks(self, callbacks: Iterable[TrainerCallback | type[TrainerCallback]]) -> None:
        """Register several callbacks, in order."""
        for callback in callbacks:
            self.add_callback(callback)

    @property
    def callback_list(self) -> list[TrainerCallback]:
        """The registered callbacks, in call order."""
        return self.callbacks

    def clear_callbacks(self) -> None:
        """Remove every callback."""
        self.callbacks = []
        self._table = {}

    def call_event(self, event: str, trainer: Trainer, **kwargs: Any) -> None:
        """Call ``event`` as scramjet does, with what the peer's loop did at that point.

        On the Trainer's own handler: before ``on_train_epoch_end`` / ``on_eval_epoch_end``
        the epoch's loss is recorded (after the hook of the same name, which need not call
        ``super()``), ``on_train_step_end`` receives ``step``, the batch's index in the
        epoch, and ``on_eval_epoch_start`` / ``on_eval_epoch_end`` receive
        ``is_intermediate``: True for an evaluation inside a training epoch (one that
        ``StepBasedEvaluationCallback`` runs), False for an epoch's own or a standalone one.
        """
        if getattr(trainer, "callback_handler", None) is self:
            name = str(getattr(event, "value", event))
            record = getattr(trainer, "_record_epoch_loss", None)
            if record is not None and name in _LOSS_EVENTS:
                record(_LOSS_EVENTS[name])
            if name == "on_train_step_end":
                kwargs.setdefault("step", trainer.state.batches_seen_in_epoch)
            intermediate = getattr(trainer, "_intermediate_evaluation", None)
            if intermediate is not None and name in ("on_eval_epoch_start", "on_eval_epoch_end"):
                kwargs.setdefault("is_intermediate", intermediate())
            super().call_event(event, trainer, **kwargs)
            return
        super().call_event(event, trainer, **kwargs)


#: The events before which the peer's loop recorded an epoch's mean loss, and the metric.
_LOSS_EVENTS = {"on_train_epoch_end": "train_loss_epoch", "on_eval_epoch_end": "eval_loss_epoch"}


class LogMetricsCallback(_CoreLogMetrics):
    """scramjet's metric line per epoch, or the peer's ``log_metrics`` for a subclass.

    A subclass that overrides ``log_metrics(trainer, metrics)`` (a logger for another
    platform, as pytorch-accelerated documents) receives, as in the peer, the latest
    value of every metric whose name contains ``"train"`` at the end of each training
    epoch, and of every other metric at the end of each evaluation epoch, on every
    process. Without the override, the line of :class:`scramjet.callbacks.LogMetricsCallback`
    is printed.
    """

    def _peer_logging(self) -> bool:
        return type(self).log_metrics is not LogMetricsCallback.log_metrics

    def log_metrics(self, trainer: Trainer, metrics: dict[str, Any]) -> None:
        """Print each metric (override to send them elsewhere)."""
        for name, value in metrics.items():
            trainer.print(f"{name}: {value}")

    def _send(self, trainer: Trainer, train: bool) -> None:
        history = trainer.run_history
        names = [n for n in sorted(history.get_metric_names()) if ("train" in n) == train]
        self.log_metrics(trainer, {n: history.get_latest_metric(n) for n in names})

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """The peer's logging point for the training metrics."""
        if self._peer_logging():
            self._send(trainer, train=True)

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """The peer's logging point for the other metrics."""
        if self._peer_logging():
            self._send(trainer, train=False)

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """scramjet's line, unless ``log_metrics`` is overridden."""
        if not self._peer_logging():
            super().on_training_run_epoch_end(trainer, **kwargs)

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Note how many values each metric has before a standalone ``evaluate()``."""
        if not trainer.in_training_run:
            history = trainer.run_history
            self._counts = {
                n: len(history.get_metric_values(n)) for n in history.get_metric_names()
            }

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """scramjet's line for a standalone ``evaluate()``, unless ``log_metrics`` is overridden.

        As the peer logs every metric at the end of an evaluation, the line holds each
        metric the evaluation recorded: the loss, and those of metric callbacks (accuracy...).
        """
        if self._peer_logging() or trainer.in_training_run:
            return
        history, before = trainer.run_history, getattr(self, "_counts", {})
        names = history.get_metric_names()
        grew = [n for n in names if len(history.get_metric_values(n)) > before.get(n, 0)]
        self._log(trainer, grew)


class TerminateOnNaNCallback(_CoreTerminateOnNaN):
    """scramjet's NaN guard that, as the peer's, also stops on a non-finite evaluation loss.

    A training loss is checked as :class:`scramjet.callbacks.TerminateOnNaNCallback` checks
    it. During a training run, a NaN or infinite ``eval_loss_epoch`` (the mean over the
    evaluation batches, so non-finite when any batch's loss is) stops the run after that
    evaluation, with the same :class:`TrainingNaNError`. ``triggered`` is True once a
    non-finite loss has stopped the run.
    """

    def __init__(self, check_every: int | None = None, raise_error: bool = True) -> None:
        super().__init__(check_every, raise_error)
        self.triggered = False

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Clear ``triggered`` from an earlier run."""
        self.triggered = False

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Stop the training run if the evaluation loss is not finite."""
        history = trainer.run_history
        if not trainer.in_training_run or "eval_loss_epoch" not in history.get_metric_names():
            return
        value = float(history.get_latest_metric("eval_loss_epoch"))
        if not math.isfinite(value):
            self._stop(
                trainer,
                TrainingNaNError(
                    f"Training stopped: the evaluation loss (eval_loss_epoch) is {value} "
                    f"after epoch {history.current_epoch}. Lower the learning rate, clip "
                    f"gradients (gradient_clip_value=...), or check the evaluation data for "
                    f"NaN/inf values."
                ),
            )

    def _stop(self, trainer: Trainer, err: TrainingNaNError) -> NoReturn:
        self.triggered = True
        super()._stop(trainer, err)


#: The core classes this module replaces with its own, same-named ones.
_PEER_CLASSES: dict[type[TrainerCallback], type[TrainerCallback]] = {
    _CoreTerminateOnNaN: TerminateOnNaNCallback,
    _CoreLogMetrics: LogMetricsCallback,
}

#: The default callbacks, each the class this module exports under its name (so a
#: ``cb is not LogMetricsCallback`` filter, or an ``isinstance`` check, finds it).
DEFAULT_CALLBACKS: tuple[type[TrainerCallback], ...] = tuple(
    _PEER_CLASSES.get(cls, cls) for cls in _CORE_DEFAULTS
)


def get_default_callbacks(progress_bar: bool = True) -> list[type[TrainerCallback]]:
    """The default callback classes, with a progress bar or with printed progress lines."""
    shown = ProgressBarCallback if progress_bar else PrintProgressCallback
    return [MoveModulesToDeviceCallback, TerminateOnNaNCallback, shown, LogMetricsCallback]


def _alias(name: str, doc: str) -> Any:
    """A property that reads and sets attribute ``name`` under the peer's name."""
    return property(
        lambda self: getattr(self, name), lambda self, value: setattr(self, name, value), doc=doc
    )


class EarlyStoppingCallback(_CoreEarlyStopping):
    """scramjet's early stopping, also under the peer's attribute names.

    ``best_metric`` is ``best``, ``early_stopping_patience_counter`` is
    ``epochs_without_improvement``, ``early_stopping_patience`` and
    ``early_stopping_threshold`` are ``patience`` and ``threshold`` (each readable and
    settable under either name).
    """

    best_metric = _alias("best", "The best value of ``watch_metric`` so far.")
    early_stopping_patience_counter = _alias(
        "epochs_without_improvement", "Epochs in a row without improvement."
    )
    early_stopping_patience = _alias("patience", "Epochs without improvement before stopping.")
    early_stopping_threshold = _alias("threshold", "Minimum change that counts as an improvement.")


class SaveBestModelCallback(_CoreSaveBest):
    """scramjet's best-model checkpoint, with the peer's ``save_scheduler``.

    Args: those of :class:`scramjet.callbacks.SaveBestModelCallback`, and
        save_scheduler: include the scheduler's state in the file.
    """

    def __init__(
        self,
        save_path: str | os.PathLike[str] = "best_model.pt",
        watch_metric: str = "eval_loss_epoch",
        greater_is_better: bool = False,
        reset_on_train: bool = True,
        save_optimizer: bool = True,
        load_saved_checkpoint: bool = True,
        save_scheduler: bool = True,
    ) -> None:
        super().__init__(
            save_path, watch_metric, greater_is_better, reset_on_train, save_optimizer,
            load_saved_checkpoint,
        )  # fmt: skip
        self.save_scheduler = save_scheduler
        self.best_metric_epoch: int | None = None

    best_metric = _alias("best", "The best value of ``watch_metric`` so far.")

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save when the watched metric improved."""
        value = float(trainer.run_history.get_latest_metric(self.watch_metric))
        if improved(value, self.best, greater_is_better=self.greater_is_better):
            self.best, self.best_metric_epoch = value, trainer.run_history.current_epoch
            _peer(trainer).save_checkpoint(
                self.save_path,
                checkpoint_kwargs={self.watch_metric: value},
                save_optimizer=self.save_optimizer,
                save_scheduler=self.save_scheduler,
            )
            self.saved = True

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Reload the best checkpoint if asked: the weights, and the optimizer and scheduler
        states saved with them (as the peer does), so a later ``train()`` continues from the
        best epoch as a whole. The run history and counters stay as trained."""
        if self.load_saved_checkpoint and self.saved:
            peer = _peer(trainer)
            peer.load_checkpoint(self.save_path, load_optimizer=peer.has_optimizer)


class ModelEmaCallback(_CoreEma):
    """scramjet's EMA of the weights (updated every optimizer step), saved when it is best.

    Evaluation runs with the EMA weights (``evaluate_during_training``), so
    ``watch_metric`` measures the EMA model; whenever it improves, the EMA weights are
    written to ``save_path`` (``model_state_dict`` at the top level).

    Args:
        decay: averaging factor per optimizer step.
        evaluate_during_training: evaluate with the EMA weights.
        save_path: file for the best EMA weights.
        watch_metric: metric that decides "best".
        greater_is_better: whether larger values of it are better.
        model_ema: class that builds the average, called as ``model_ema(model, decay=...)``;
            its ``module`` is the averaged copy, and its ``update(model)`` (when it has
            one) folds the weights in after every optimizer step, as in the peer: a class
            of your own with a decay ramp is followed, and ``ModelEma`` averages
            floating-point buffers (batch-norm statistics) like the weights.
        callbacks: callbacks that receive the evaluation events of the EMA evaluation.
    """

    def __init__(
        self,
        decay: float = 0.99,
        evaluate_during_training: bool = True,
        save_path: str | os.PathLike[str] = "ema_model.pt",
        watch_metric: str = "eval_loss_epoch",
        greater_is_better: bool = False,
        model_ema: type[Any] = ModelEma,
        callbacks: Iterable[TrainerCallback | type[TrainerCallback]] = (),
    ) -> None:
        super().__init__(decay=decay, evaluate_during_training=evaluate_during_training)
        self.best_save_path = Path(save_path)
        self.watch_metric = watch_metric
        self.greater_is_better = greater_is_better
        self.model_ema = model_ema
        self.eval_callbacks = CallbackHandler(callbacks)
        self.best: float | None = None
        self._averager: Any = None  # what model_ema built, when it has update()

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Build the average with ``model_ema`` (a restored average is loaded into it)."""
        if self._averager is None:
            built = self.model_ema(trainer.unwrapped_model, decay=self.decay)
            module = getattr(built, "module", built)
            if self.ema_model is not None:  # restored from a checkpoint
                module.load_state_dict(self.ema_model.state_dict())
            self.ema_model = module
            self._averager = built if callable(getattr(built, "update", None)) else None
        super().on_training_run_start(trainer, **kwargs)

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Fold the new weights in with ``model_ema``'s own ``update``, when it has one."""
        if self._averager is None:
            super().on_optimizer_step_end(trainer, **kwargs)
        else:
            self._averager.update(trainer.unwrapped_model)

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save the EMA weights when the watched metric improved."""
        if (
            self.ema_model is None
            or self.watch_metric not in trainer.run_history.get_metric_names()
        ):
            return
        value = float(trainer.run_history.get_latest_metric(self.watch_metric))
        if improved(value, self.best, greater_is_better=self.greater_is_better):
            self.best = value
            if trainer.is_main_process:
                _files.write_file(
                    self.best_save_path, {"model": self.ema_model}, {self.watch_metric: value},
                    step=trainer.state.global_step, epoch=trainer.state.epoch,
                )  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """The EMA weights and the best value."""
        return {**super().state_dict(), "best": self.best}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the EMA weights and the best value."""
        super().load_state_dict(state)
        self.best = state.get("best")

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Swap in the EMA weights."""
        super().on_evaluation_run_start(trainer, **kwargs)
        self.eval_callbacks.call_event("on_evaluation_run_start", trainer, **kwargs)

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Forwarded to ``callbacks``."""
        self.eval_callbacks.call_event("on_eval_epoch_start", trainer, **kwargs)

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Forwarded to ``callbacks``."""
        self.eval_callbacks.call_event("on_eval_step_end", trainer, **kwargs)

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Forwarded to ``callbacks``."""
        self.eval_callbacks.call_event("on_eval_epoch_end", trainer, **kwargs)

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Put the trained weights back."""
        self.eval_callbacks.call_event("on_evaluation_run_end", trainer, **kwargs)
        super().on_evaluation_run_end(trainer, **kwargs)


class LimitEvalStepsCallback(_CoreLimitEval):
    """Ends evaluation epochs after ``num_eval_steps`` batches.

    With ``limit_intermediate_only`` only the evaluations run inside a training epoch
    (e.g. by ``StepBasedEvaluationCallback``) are limited; the end-of-epoch ones run whole.
    """

    def __init__(self, num_eval_steps: int, limit_intermediate_only: bool = False) -> None:
        super().__init__(num_eval_steps)
        self.limit_intermediate_only = limit_intermediate_only
        self._limited = True

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Inside a training epoch, the training loader is still the current one."""
        inside_epoch = trainer.current_dataloader is not None
        self._limited = inside_epoch or not self.limit_intermediate_only

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Count; end the evaluation epoch at the limit."""
        if self._limited:
            super().on_eval_step_end(trainer, **kwargs)


class SaveTrainingStateCallback(TrainerCallback):
    """Saves the full training state (``trainer.save_training_state``) into ``save_dir``.

    Each save is a directory ``save_dir/checkpoint_epoch_<n>``, ``checkpoint_step_<n>`` or
    ``checkpoint_final``; ``train(resume_from=<that directory>)`` resumes from it.

    Args:
        save_dir: parent directory of the saved states.
        save_every_n_epochs: save after every N-th training epoch.
        save_every_n_steps: save every N training steps (batches), before the batch's
            backward pass (with gradient accumulation, prefer steps that end a window).
        save_at_end: save when training ends.
        max_checkpoints: keep only this many saved states (the oldest are removed).
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str] = "training_states",
        save_every_n_epochs: int | None = None,
        save_every_n_steps: int | None = None,
        save_at_end: bool = True,
        max_checkpoints: int | None = None,
    ) -> None:
        for name, value in (("save_every_n_epochs", save_every_n_epochs),
                            ("save_every_n_steps", save_every_n_steps),
                            ("max_checkpoints", max_checkpoints)):  # fmt: skip
            if value is not None and value < 1:
                raise ValueError(f"{name} must be ≥ 1 or None; received {value}.")
        self.save_dir = Path(save_dir)
        self.save_every_n_epochs = save_every_n_epochs
        self.save_every_n_steps = save_every_n_steps
        self.save_at_end = save_at_end
        self.max_checkpoints = max_checkpoints
        self._saved_checkpoints: list[str] = []
        self._steps = 0

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Create the directory."""
        if trainer.is_main_process:
            self.save_dir.mkdir(parents=True, exist_ok=True)

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save every N steps."""
        self._steps += 1
        if self.save_every_n_steps and self._steps % self.save_every_n_steps == 0:
            self._save(trainer, f"checkpoint_step_{self._steps}")

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save every N epochs."""
        epoch = trainer.run_history.current_epoch
        if self.save_every_n_epochs and epoch % self.save_every_n_epochs == 0:
            self._save(trainer, f"checkpoint_epoch_{epoch}")

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save at the end if asked."""
        if self.save_at_end:
            self._save(trainer, "checkpoint_final")

    def _save(self, trainer: Trainer, name: str) -> None:
        path = str(self.save_dir / name)
        _peer(trainer).save_training_state(path)
        trainer.print(f"Saved the training state to {path}")
        self._saved_checkpoints.append(path)
        while self.max_checkpoints and len(self._saved_checkpoints) > self.max_checkpoints:
            oldest = Path(self._saved_checkpoints.pop(0))
            if trainer.is_main_process and oldest.exists():
                shutil.rmtree(oldest)

    def state_dict(self) -> dict[str, Any]:
        """The step count and the saved states."""
        return {"steps": self._steps, "saved": list(self._saved_checkpoints)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the step count and the saved states."""
        self._steps = int(state.get("steps", 0))
        self._saved_checkpoints = list(state.get("saved", []))


class WSDCheckpointCallback(TrainerCallback):
    """Checkpoints of a ``WSDLrScheduler`` run: before each decay, and after it.

    Before a decay (``pre_decay_step``) the full training state is saved into the
    directory ``save_dir/checkpoint_<step>_wsd_pre_decay`` (a longer run continues from it
    with ``is_continuation_from_checkpoint=True``); at a period's end the decayed model is
    saved as ``save_dir/checkpoint_<step>_wsd_post_decay.pt``. The end of training saves a
    post-decay file too.

    Args:
        save_dir: where the checkpoints go.
        initial_checkpoint: a checkpoint to start from: a pre-decay directory (the full
            state is restored) or a ``.pt`` file (weights and optimizer; the new run's
            scheduler is kept).
    """

    PRE, POST = "wsd_pre_decay", "wsd_post_decay"

    def __init__(
        self,
        save_dir: str | os.PathLike[str] = "wsd_checkpoints",
        initial_checkpoint: str | os.PathLike[str] | None = None,
    ) -> None:
        self.save_dir = Path(save_dir)
        self.initial_checkpoint = initial_checkpoint
        self.last_checkpoint_step: int | None = None
        self.checkpoint_steps: list[int] = []

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Check the scheduler, create the directory, load ``initial_checkpoint``."""
        scheduler = _wsd_scheduler(trainer)
        self.save_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_steps = list(scheduler.get_checkpoint_steps())
        if self.initial_checkpoint is None:
            return
        path = Path(self.initial_checkpoint)
        if not path.exists():
            raise FileNotFoundError(
                f"initial_checkpoint {str(path)!r} does not exist; pass a directory saved "
                f"before a decay, or a .pt file saved after one."
            )
        if path.is_dir():
            meta = _peer(trainer).load_training_state(str(path))
        else:
            meta = _peer(trainer).load_checkpoint(str(path), load_scheduler=False)
        self.last_checkpoint_step = meta.get("step")

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save when the updates done reach a pre-decay step or a period's end."""
        scheduler = _wsd_scheduler(trainer)
        done = scheduler.get_current_step() + 1
        if done == self.last_checkpoint_step:
            return
        phase = scheduler.get_phase_info()
        if done == phase["pre_decay_step"]:
            self._save(trainer, done, self.PRE)
        elif done == phase["period_end"]:
            self._save(trainer, done, self.POST)

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save the final, decayed model."""
        done = _wsd_scheduler(trainer).get_current_step() + 1
        if done != self.last_checkpoint_step:
            self._save(trainer, done, self.POST)

    def _save(self, trainer: Trainer, step: int, kind: str) -> None:
        scheduler = _wsd_scheduler(trainer)
        meta = {
            "step": step,
            "checkpoint_type": kind,
            "total_steps": scheduler.total_steps,
            "decay_fraction": scheduler.decay_phase_ratio,
            "timestamp": datetime.datetime.now().isoformat(timespec="seconds"),
        }
        name = f"checkpoint_{step}_{kind}"
        if kind == self.PRE:
            path = str(self.save_dir / name)
            _peer(trainer).save_training_state(path, checkpoint_kwargs=meta)
        else:
            path = str(self.save_dir / f"{name}.pt")
            trainer.save_checkpoint(path, checkpoint_kwargs=meta)
        trainer.print(f"Saved the {kind.replace('_', ' ')} checkpoint at step {step}: {path}")
        self.last_checkpoint_step = step


def _wsd_scheduler(trainer: Trainer) -> Any:
    scheduler = trainer.scheduler
    if scheduler is None or not hasattr(scheduler, "get_phase_info"):
        raise TypeError(
            f"WSDCheckpointCallback needs the Trainer's scheduler to be a WSDLrScheduler; "
            f"received {type(scheduler).__name__}. Pass "
            f"create_scheduler_fn=WSDLrScheduler.create_scheduler_fn(...) to train()."
        )
    return scheduler


__all__ = [
    "DEFAULT_CALLBACKS",
    "CallbackHandler",
    "CallbackMethodNotImplementedError",
    "ConvertSyncBatchNormCallback",
    "EarlyStoppingCallback",
    "LimitBatchesCallback",
    "LimitEvalStepsCallback",
    "LogMetricsCallback",
    "ModelEmaCallback",
    "MoveModulesToDeviceCallback",
    "PrintProgressCallback",
    "ProgressBarCallback",
    "SaveBestModelCallback",
    "SaveTrainingStateCallback",
    "StepBasedEvaluationCallback",
    "StopTrainingError",
    "TerminateOnNaNCallback",
    "TrainerCallback",
    "WSDCheckpointCallback",
    "get_default_callbacks",
]
