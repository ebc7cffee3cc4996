"""Callbacks that control the run: NaN guard, early stopping, limits, step-based evaluation."""

from __future__ import annotations

import math
import operator
import warnings
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from scramjet.callbacks.base import StopTrainingError, TrainerCallback
from scramjet.runtime import distributed as dist
from scramjet.runtime.stacklevel import user_stacklevel

if TYPE_CHECKING:
    from scramjet.trainer import Trainer


class TrainingNaNError(StopTrainingError):
    """The training loss became NaN or infinite. Raised from ``train()`` after a clean stop."""

    reraise = True
    every_rank = True  # the callback's check is one collective: every rank raises it alike


_ACCELERATOR_GROUP = 8


class TerminateOnNaNCallback(TrainerCallback):
    """Stops training cleanly when the training loss is NaN or infinite.

    The run ends normally (``training_run_end`` and end-of-run callbacks still run, so
    logs and trackers are closed) and ``train()`` then raises :class:`TrainingNaNError`
    naming the step; the process is never exited.

    A loss on the CPU is checked at every step, before its update is applied, so the
    weights never take a non-finite update. On an accelerator, losses are checked in
    groups of 8 steps so the loop needs no device synchronisation per step: up to 7 more
    updates apply before the stop. The first non-finite loss of a group is reported.

    Args:
        check_every: how many training steps to check at once; ``None`` (the default)
            means every step on the CPU and every 8 steps on an accelerator.
        raise_error: raise :class:`TrainingNaNError` from ``train()`` after stopping; with
            False, training just stops, the main process prints the error's message and
            ``trainer.stop_reason`` holds the error.
    """

    def __init__(self, check_every: int | None = None, raise_error: bool = True) -> None:
        if check_every is not None and (
            isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 1
        ):
            raise ValueError(
                f"check_every must be a whole number ≥ 1, or None (every step on the CPU, "
                f"every {_ACCELERATOR_GROUP} steps on an accelerator); received {check_every!r}."
            )
        self.check_every = check_every
        self.raise_error = raise_error
        self._pending: list[torch.Tensor] = []
        # Optimizer updates made before each pending loss's batch (the group is checked later).
        self._steps: list[int] = []
        self._alone = False  # one process (read once an epoch, not at every step)

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start a fresh group of losses."""
        self._pending, self._steps = [], []
        self._alone = dist.get_world_size() == 1

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Collect the loss; check the group when full."""
        loss = kwargs["batch_output"]["loss"].detach()
        self._pending.append(loss)
        self._steps.append(trainer.state.global_step)
        group = self.check_every
        if group is None:  # a CPU loss is read without waiting: check it before its update
            group = 1 if loss.device.type == "cpu" else _ACCELERATOR_GROUP
        if len(self._pending) < group:
            return
        # One CPU loss, one process: read as a number, without the tensor work of a
        # group's check (four tensor ops a step took ~5% of a small model's step).
        if group == 1 and self._alone and loss.numel() == 1 and math.isfinite(loss.item()):
            self._pending.clear()
            self._steps.clear()
            return
        # The loop counts this batch as seen only after its backward step.
        self._check(trainer, trainer.state.batches_seen_in_epoch + 1)

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Check what is left at the end of the epoch."""
        if self._pending:
            self._check(trainer, trainer.state.batches_seen_in_epoch)

    def _check(self, trainer: Trainer, seen: int) -> None:
        losses, steps, self._pending, self._steps = torch.stack(self._pending), self._steps, [], []
        finite = torch.isfinite(losses)
        all_finite = finite.all()
        if dist.get_world_size() > 1:  # every rank must stop together, or the others hang
            all_finite = dist.reduce(all_finite.to(torch.int32), op="min", check=False).bool()
        if bool(all_finite):
            return
        if bool(finite.all()):
            other = TrainingNaNError(
                f"Training stopped: another process saw a non-finite loss (this rank's losses "
                f"were finite up to batch {seen} of epoch {trainer.run_history.current_epoch})."
            )
            self._stop(trainer, other)
        first = int((~finite).nonzero()[0])
        batch = seen - len(losses) + first + 1
        self._stop(
            trainer,
            TrainingNaNError(
                f"Training stopped: the loss is {float(losses[first])} at batch {batch} of "
                f"epoch {trainer.run_history.current_epoch} (after {steps[first]} optimizer "
                f"steps). Lower the learning rate, clip gradients (gradient_clip_value=...), "
                f"or check the data for NaN/inf values."
            ),
        )

    def _stop(self, trainer: Trainer, err: TrainingNaNError) -> NoReturn:
        err.reraise = self.raise_error
        if not self.raise_error:  # nothing else would tell the user why the run ended
            trainer.print(err, flush=True)
        raise err


def improved(
    value: float, best: float | None, *, greater_is_better: bool, threshold: float = 0.0
) -> bool:
    """Whether ``value`` beats ``best`` by more than ``threshold`` (always, when no best yet).

    A NaN ``value`` never improves, and a NaN ``best`` (kept by an older version) is beaten
    by any other value: nothing compares better than NaN, so a NaN best would stay for ever.
    """
    if math.isnan(value):
        return False
    if best is None or math.isnan(best):
        return True
    return value > best + threshold if greater_is_better else value < best - threshold


def is_resumed_run(trainer: Trainer) -> bool:
    """Whether the run starting now continues a checkpoint (``train(resume_from=...)``).

    ``train()`` starts its counters at zero; only a restored checkpoint moves them before
    the first step.
    """
    state = trainer.state
    return bool(state.global_step or state.epoch or state.batches_seen_in_epoch)


def metric_values_recorded(trainer: Any, name: str) -> int:
    """How many values of ``name`` the run history holds (0 for a history that cannot say)."""
    values = getattr(trainer.run_history, "get_metric_values", None)
    return len(values(name)) if values is not None else 0


def warn_if_not_evaluated(trainer: Any, name: str, who: str) -> None:
    """At a run's start: a watched ``eval_`` metric in a run without evaluation data would
    only be found missing after the first epoch (unless a callback evaluates itself)."""
    if name.startswith("eval_") and getattr(trainer, "eval_dataloader", False) is None:
        warnings.warn(
            f"{who} watches {name!r}, but train() was given no eval_dataset, so that metric "
            f"is recorded only if a callback of yours evaluates. Pass train(..., "
            f"eval_dataset=...), or watch a training metric (watch_metric='train_loss_epoch').",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def new_metric_value(trainer: Any, name: str, seen: int) -> tuple[float | None, int]:
    """The latest value of ``name`` if one was recorded since ``seen`` values, else None.

    Returns the value and the new count. Epochs that record no value of the metric (it is
    measured every few epochs, say) are thereby told apart from epochs that did not improve;
    so is a metric measured for the first time after a few epochs.

    Raises:
        MetricNotFoundError: no value of ``name`` was ever recorded and a recorded metric's
            name is close to it (a misspelt name); the message lists the recorded metrics.
            :func:`check_metric_recorded` warns at the run's end for any other name.
    """
    history = trainer.run_history
    if not hasattr(history, "get_metric_values"):  # a stand-in that only has the latest value
        return float(history.get_latest_metric(name)), seen
    count = len(history.get_metric_values(name))
    if count == 0:
        names = [n for n in history.get_metric_names() if history.get_metric_values(n)]
        if _misspelt(str(name), names):
            history.get_latest_metric(name)  # raises, naming the metrics and the likely one
        return None, seen
    if count <= seen:
        return None, seen
    return float(history.get_latest_metric(name)), count


#: The Trainer's own metrics: one is never a misspelling of the other (eval_loss_epoch is
#: recorded only in epochs that evaluate, which may start after the first).
_OWN_METRICS = frozenset({"train_loss_epoch", "eval_loss_epoch"})


def _misspelt(name: str, recorded: list[str]) -> bool:
    """Whether ``name`` is a recorded name with a typo: at most two edits from one."""
    if name in _OWN_METRICS:
        return False
    return any(_edits(name, other) <= 2 for other in recorded)


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (names are short)."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def check_metric_recorded(trainer: Any, name: str, who: str) -> None:
    """At a run's end: a watched metric that no epoch recorded (``who`` never acted) is
    said in a warning naming the recorded ones, unless nothing was recorded at all (the
    run ended inside its first epoch)."""
    history = trainer.run_history
    if not hasattr(history, "get_metric_values") or history.get_metric_values(name):
        return
    recorded = sorted(n for n in history.get_metric_names() if history.get_metric_values(n))
    if recorded:
        warnings.warn(
            f"{who}: the run recorded no value of {name!r}, so it never acted; recorded "
            f"metrics: {recorded}. Watch one of those, or record {name!r} (an evaluation, "
            f"or trainer.log) in at least one epoch.",
            stacklevel=user_stacklevel(),
        )


def epochs_in_history(trainer: Any) -> int | None:
    """The run's last epoch as the run history numbers it, or None when unknown.

    A ``train(reset_run_history=False)`` after another run numbers its epochs after that
    run's (``current_epoch`` 3 and 4 for a second run of 2 epochs): its total counts those
    earlier epochs too, so ``epoch 3/4`` is shown, never ``epoch 3/2``.
    """
    if not getattr(trainer, "has_run_config", False):
        return None
    total = trainer.run_config.num_epochs
    if not total:
        return None
    state = getattr(trainer, "state", None)
    before = trainer.run_history.current_epoch - 1 - getattr(state, "epoch", 0)
    return int(total) + max(int(before), 0)


def _at_epoch(trainer: Any) -> str:
    """`` at epoch 3/10`` for a message (as much of it as ``trainer`` can tell)."""
    epoch = getattr(trainer.run_history, "current_epoch", None)
    if epoch is None:
        return ""
    total = epochs_in_history(trainer)
    return f" at epoch {epoch}" + (f"/{total}" if total else "")


class EarlyStoppingCallback(TrainerCallback):
    """Stops training when a metric has not improved for ``early_stopping_patience`` epochs.

    Only epochs that record a new value of the metric count: one measured every few epochs
    uses up patience only when it is measured. A NaN value counts as no improvement and is
    never the best. A run resumed from a checkpoint keeps the best value and the count;
    one resumed from a checkpoint of a run it had already stopped stops before training.
    When it stops the run, the main process prints why (the epoch, the metric's best and
    latest values, the threshold); ``trainer.stop_reason`` holds the same message.

    Args:
        early_stopping_patience: epochs without improvement before stopping.
        early_stopping_threshold: minimum change that counts as an improvement.
        watch_metric: metric name in the run history.
        greater_is_better: whether larger values are better.
        reset_on_train: forget the best value at the start of each ``train()`` (not of a
            ``train(resume_from=...)`` that restored it).
    """

    def __init__(
        self,
        early_stopping_patience: int = 1,
        early_stopping_threshold: float = 0.01,
        watch_metric: str = "eval_loss_epoch",
        greater_is_better: bool = False,
        reset_on_train: bool = True,
    ) -> None:
        try:  # an int or a NumPy integer; not 1.5 or "3"
            patience = operator.index(early_stopping_patience)
        except TypeError:
            patience = 0
        if isinstance(early_stopping_patience, bool) or patience < 1:
            raise ValueError(
                f"early_stopping_patience must be a whole number ≥ 1 (epochs without "
                f"improvement before stopping); received {early_stopping_patience!r}. Pass 1 to "
                f"stop at the first epoch without improvement (what patience=0 means in Keras "
                f"and AIToolbox)."
            )
        if not (
            isinstance(early_stopping_threshold, int | float)
            and math.isfinite(early_stopping_threshold)
            and early_stopping_threshold >= 0
        ):
            raise ValueError(
                f"early_stopping_threshold must be a finite number ≥ 0 (how much better a "
                f"value must be to count as an improvement, whether greater_is_better or not); "
                f"received {early_stopping_threshold!r}. A negative one lets a worsening metric "
                f"count as improving, so the run never stops. Pass its size, e.g. 0.01, or 0.0."
            )
        self.patience = patience
        self.threshold = early_stopping_threshold
        self.watch_metric = watch_metric
        self.greater_is_better = greater_is_better
        self.reset_on_train = reset_on_train
        self.best: float | None = None
        self.epochs_without_improvement = 0
        self._seen = 0  # values of the metric already judged

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Reset the counters when asked (a resumed run keeps the restored ones)."""
        resumed = is_resumed_run(trainer)
        if self.reset_on_train and not resumed:
            self.best, self.epochs_without_improvement = None, 0
        self._seen = metric_values_recorded(trainer, self.watch_metric)
        warn_if_not_evaluated(trainer, self.watch_metric, type(self).__name__)
        if resumed and self.epochs_without_improvement >= self.patience:
            self._stop_resumed_run(trainer)

    def _stop_resumed_run(self, trainer: Trainer) -> None:
        """The checkpoint was saved by a run this callback had already stopped: a rerun
        (``resume_from="auto"`` after a crash past ``train()``, a requeue) trains no further."""
        best = "it has been NaN" if self.best is None else f"best {self.best:.6g}"
        err = StopTrainingError(
            f"Early stopping: the checkpoint resumed from was saved by a run that early stopping "
            f"had already stopped ({self.watch_metric}: {best}, "
            f"{self.epochs_without_improvement} epoch(s) without improvement, "
            f"early_stopping_patience={self.patience}); nothing more is trained. To train on, "
            f"pass a larger early_stopping_patience."
        )
        say = getattr(trainer, "print", None)
        if say is not None:
            say(err, flush=True)
        raise err

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Compare this epoch's metric with the best so far (an epoch without one: skipped)."""
        value, self._seen = new_metric_value(trainer, self.watch_metric, self._seen)
        if value is None:
            return
        if improved(
            value, self.best, greater_is_better=self.greater_is_better, threshold=self.threshold
        ):
            self.best, self.epochs_without_improvement = value, 0
            return
        self.epochs_without_improvement += 1
        if self.epochs_without_improvement >= self.patience:
            since = "has been NaN" if self.best is None else f"has not improved on {self.best:.6g}"
            err = StopTrainingError(
                f"Early stopping{_at_epoch(trainer)}: {self.watch_metric} {since} for "
                f"{self.epochs_without_improvement} epoch(s) (latest {value:.6g}; an "
                f"improvement must be larger than early_stopping_threshold={self.threshold:g})."
            )
            say = getattr(trainer, "print", None)  # a stand-in holding only the history: none
            if say is not None:
                say(err, flush=True)  # the run ends quietly otherwise: say why, and where
            raise err

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """A watched metric that the whole run never recorded is said in a warning."""
        check_metric_recorded(trainer, self.watch_metric, type(self).__name__)

    def state_dict(self) -> dict[str, Any]:
        """Best value and the count of epochs without improvement."""
        return {"best": self.best, "epochs_without_improvement": self.epochs_without_improvement}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counters (a run resumed from them keeps them)."""
        self.best = state["best"]
        self.epochs_without_improvement = state["epochs_without_improvement"]


class LimitBatchesCallback(TrainerCallback):
    """Ends every training and evaluation epoch after ``num_batches`` batches (for debugging)."""

    def __init__(self, num_batches: int) -> None:
        if num_batches < 1:
            raise ValueError(f"num_batches must be ≥ 1; received {num_batches}.")
        self.num_batches = num_batches
        # Separate counts: an evaluation can run inside a training epoch (step-based).
        self._count = {"train": 0, "eval": 0}

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Reset the training counter (a resumed epoch counts the batches it already ran)."""
        self._count["train"] = trainer.state.batches_seen_in_epoch

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Reset the evaluation counter."""
        self._count["eval"] = 0

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Count; end the training epoch at the limit."""
        self._step(trainer, "train")

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Count; end the evaluation epoch at the limit."""
        self._step(trainer, "eval")

    def _step(self, trainer: Trainer, stage: str) -> None:
        self._count[stage] += 1
        if self._count[stage] >= self.num_batches:
            trainer.end_epoch()


class LimitEvalStepsCallback(TrainerCallback):
    """Ends every evaluation epoch after ``num_eval_steps`` batches."""

    def __init__(self, num_eval_steps: int) -> None:
        if num_eval_steps < 1:
            raise ValueError(f"num_eval_steps must be ≥ 1; received {num_eval_steps}.")
        self.num_eval_steps = num_eval_steps
        self._count = 0

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Reset the counter."""
        self._count = 0

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Count; end the evaluation epoch at the limit."""
        self._count += 1
        if self._count >= self.num_eval_steps:
            trainer.end_epoch()


class StepBasedEvaluationCallback(TrainerCallback):
    """Evaluates every ``eval_every_n_steps`` optimizer updates (besides each epoch end).

    An interval that ends with the epoch's last update (or the run's last, with
    ``max_num_train_steps``) is left to the Trainer's end-of-epoch evaluation, so the same
    weights are never evaluated twice.
    """

    def __init__(self, eval_every_n_steps: int) -> None:
        if eval_every_n_steps < 1:
            raise ValueError(f"eval_every_n_steps must be ≥ 1; received {eval_every_n_steps}.")
        self.eval_every_n_steps = eval_every_n_steps
        self.evaluations = 0

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Run an evaluation at the chosen interval."""
        if trainer.state.global_step % self.eval_every_n_steps or is_last_update(trainer):
            return
        trainer.run_evaluation()
        self.evaluations += 1


def is_last_update(trainer: Trainer) -> bool:
    """The update that ends the epoch or the run: the Trainer evaluates right after it."""
    state, total = trainer.state, trainer.batches_in_epoch
    cap = trainer.run_config.max_num_train_steps
    return bool(total and state.batches_seen_in_epoch >= total) or (
        cap is not None and state.global_step >= cap
    )
