"""Run settings (frozen), the mutable loop state and the run history.

``RunConfig`` is fixed for one ``train()`` call. ``TrainState`` is what changes every step
and what a checkpoint must carry to resume exactly. ``RunHistory`` records metric values,
one per epoch for ``*_epoch`` metrics; ``EpochLosses`` the batch losses of the epoch in
progress. Each stateful part saves and restores itself
(``state_dict`` / ``load_state_dict``).
"""

from __future__ import annotations

import contextlib
import difflib
import math
import os
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from scramjet.runtime import distributed as dist
from scramjet.trainer.checks import ready_loader_batch_size
from scramjet.trainer.samplers import safe_len


@dataclass(frozen=True)
class RunConfig:
    """Settings of one training (or evaluation) run, fixed when it starts."""

    num_epochs: int
    train_per_device_batch_size: int
    eval_per_device_batch_size: int
    num_update_steps_per_epoch: int
    max_num_train_steps: int | None
    gradient_accumulation_steps: int
    gradient_clip_value: float | None
    gradient_clip_norm: float | None
    precision: str
    num_processes: int
    is_local_process_zero: bool
    is_world_process_zero: bool
    device: str

    @property
    def total_update_steps(self) -> int:
        """Optimizer updates in the whole run (``max_num_train_steps`` when given).

        For a dataset without a length it is ``max_num_train_steps``, or 0 if that is not
        given either (unknown).
        """
        total = self.num_epochs * self.num_update_steps_per_epoch
        if self.max_num_train_steps:
            return min(total, self.max_num_train_steps) if total else self.max_num_train_steps
        return total

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict view, for logging and hyperparameter files."""
        return asdict(self)


def plan_run(
    train_dl: Any,
    eval_dl: Any,
    num_epochs: int,
    train_bs: int,
    eval_bs: int,
    max_steps: int | None,
    accum: int,
    clips: tuple[float | None, float | None],
    precision: str,
    device: torch.device,
) -> RunConfig:
    """The settings of a run over ``train_dl`` (None: an evaluation only). Ready
    DataLoaders keep their own batch sizes; ``clips`` is (clip value, clip norm)."""
    n_batches = safe_len(train_dl) if train_dl is not None else 0
    if train_dl is not None:
        train_bs = ready_loader_batch_size(train_dl, train_bs)
    updates_per_epoch = math.ceil(n_batches / accum) if n_batches else 0
    if max_steps and updates_per_epoch:
        # As in pytorch-accelerated, a step budget sets the run's length: enough epochs
        # to make max_steps updates (the last one stops early). Without a length, the
        # dataset's end still ends an epoch and num_epochs still bounds the run.
        num_epochs = math.ceil(max_steps / updates_per_epoch)
    return RunConfig(
        num_epochs=num_epochs,
        train_per_device_batch_size=train_bs,
        eval_per_device_batch_size=ready_loader_batch_size(eval_dl, eval_bs),
        num_update_steps_per_epoch=updates_per_epoch,
        max_num_train_steps=max_steps,
        gradient_accumulation_steps=accum,
        gradient_clip_value=clips[0],
        gradient_clip_norm=clips[1],
        precision=precision,
        num_processes=dist.get_world_size(),
        is_local_process_zero=int(os.environ.get("LOCAL_RANK", "0")) == 0,
        is_world_process_zero=dist.is_main_process(),
        device=str(device),
    )


@dataclass
class TrainState:
    """The loop's counters: enough, with the model and optimizer, to resume exactly.

    Attributes:
        global_step: optimizer updates done so far in the run.
        epoch: index of the current (or next) epoch, 0-based. The run history's
            ``current_epoch`` follows it during a run (one counter, not two).
        batches_seen_in_epoch: micro-batches consumed in the current epoch; a resumed run
            skips this many batches of the sampler order without running them.
        samples_seen: training samples processed in the run (this process).
        stop_requested: ``trainer.stop_training()`` was called.
        epoch_finished: the current epoch's training and evaluation are done (true while
            ``on_training_run_epoch_end`` runs): a checkpoint saved now resumes at the
            start of the next epoch.
        train_done: the current epoch's training part is over (true from
            ``train_epoch_end`` on; not for an epoch cut short): a checkpoint saved now
            (in ``on_train_epoch_end``, say) resumes with the epoch's evaluation, without
            running its end again.
        eval_done: the current epoch's evaluation is over too (true from ``eval_epoch_end``
            of the evaluation the epoch runs after its training; not for one called by
            hand): a checkpoint saved now (in ``on_eval_epoch_end``, say) resumes at the
            epoch's end, without evaluating again.
        planned: the run's ``num_epochs`` and ``max_num_train_steps`` (0: none), as its
            checkpoints record them.
        resumed_stopped_run: restored from a checkpoint saved after ``stop_training()``
            ended its run (not saved).
    """

    global_step: int = 0
    epoch: int = 0
    batches_seen_in_epoch: int = 0
    samples_seen: int = 0
    stop_requested: bool = False
    epoch_finished: bool = False
    train_done: bool = False
    eval_done: bool = False
    planned: tuple[int, int] = (0, 0)
    resumed_stopped_run: bool = False

    def state_dict(self) -> dict[str, Any]:
        """Counters as a plain dict, as a resumed run should start from them."""
        state = asdict(self)
        del state["epoch_finished"], state["resumed_stopped_run"]
        if self.epoch_finished:  # saved between epochs: resume at the next epoch's start
            state.update(epoch=self.epoch + 1, batches_seen_in_epoch=0)
            state.update(train_done=False, eval_done=False)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore counters saved by :meth:`state_dict`."""
        for key, value in state.items():
            if hasattr(self, key):
                setattr(self, key, value)
        # A stop asked for in the saved run ended that run: a rerun stops before training
        # unless it plans a longer run (scramjet.trainer._rerun).
        self.resumed_stopped_run = bool(state.get("stop_requested", False))
        self.planned = (int(self.planned[0]), int(self.planned[1]))
        self.stop_requested = self.epoch_finished = False


class MetricNotFoundError(KeyError, ValueError):
    """A metric that was never recorded was asked for (both a ``KeyError`` and a ``ValueError``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RunHistory:
    """Metric values recorded during training, in the order they were recorded.

    ``current_epoch`` is 1-based. While a Trainer runs, it follows the Trainer's
    ``state.epoch`` (plus the epochs of earlier runs when ``reset_run_history=False``), so
    the loop keeps one epoch counter.

    Example:
        >>> history = RunHistory()
        >>> history.update_metric("train_loss_epoch", 0.5)
        >>> history.get_latest_metric("train_loss_epoch")
        0.5
    """

    def __init__(self) -> None:
        self._metrics: defaultdict[str, list[Any]] = defaultdict(list)
        self._epoch = 1  # used when no TrainState is followed
        self._state: TrainState | None = None
        self._steps: dict[str, int] = {}  # global_step of each metric's latest value

    @property
    def current_epoch(self) -> int:
        """The current epoch, 1-based."""
        if self._state is not None:
            return self._epoch + self._state.epoch
        return self._epoch

    @current_epoch.setter
    def current_epoch(self, value: int) -> None:
        self._epoch = int(value) - (self._state.epoch if self._state is not None else 0)

    def follow(self, state: TrainState) -> None:
        """Count epochs with ``state.epoch`` from now on (the Trainer calls it in ``train()``)."""
        current, self._state = self.current_epoch, None
        self._state = state
        self.current_epoch = current

    def get_metric_names(self) -> set[str]:
        """Names of all recorded metrics."""
        return set(self._metrics)

    def get_metric_values(self, metric_name: str) -> list[Any]:
        """All values recorded for ``metric_name`` (empty if none)."""
        return list(self._metrics.get(metric_name, []))

    def get_latest_metric(self, metric_name: str) -> Any:
        """The most recent value of ``metric_name``.

        Raises:
            MetricNotFoundError: no value was recorded under that name (a ``ValueError``, as
                pytorch-accelerated raises, and a ``KeyError``); the message lists the names.
        """
        values = self._metrics.get(metric_name)
        if not values:
            recorded = sorted(name for name, got in self._metrics.items() if got)
            close = difflib.get_close_matches(str(metric_name), recorded, n=1, cutoff=0.75)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise MetricNotFoundError(
                f"No values recorded for metric {metric_name!r}; recorded metrics: "
                f"{recorded or 'none yet'}.{hint}"
            )
        return values[-1]

    def update_metric(self, metric_name: str, metric_value: Any) -> None:
        """Append a value (tensors are converted to Python numbers)."""
        if hasattr(metric_value, "item") and getattr(metric_value, "numel", lambda: 1)() == 1:
            metric_value = metric_value.item()
        self._metrics[metric_name].append(metric_value)
        if self._state is not None:
            self._steps[metric_name] = self._state.global_step

    @property
    def measured_at(self) -> dict[str, int]:
        """The optimizer step of each metric's latest value, for the metrics recorded while
        a Trainer ran: a checkpoint saved at another step holds other weights than the
        ones that value was measured on."""
        return dict(self._steps)

    @measured_at.setter
    def measured_at(self, steps: Mapping[str, int]) -> None:
        self._steps = {str(k): int(v) for k, v in steps.items()}

    def _increment_epoch(self) -> None:
        self._epoch += 1

    def reset(self) -> None:
        """Forget every metric and start again at epoch 1."""
        self._metrics, self._steps = defaultdict(list), {}
        self.current_epoch = 1

    def state_dict(self) -> dict[str, Any]:
        """Everything recorded, as plain Python values (the epoch as a resumed run starts)."""
        epoch = self.current_epoch
        if self._state is not None and self._state.epoch_finished:
            epoch += 1  # saved between epochs, as TrainState.state_dict says
        return {"metrics": {k: list(v) for k, v in self._metrics.items()}, "epoch": epoch}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (after the followed TrainState's)."""
        self._metrics = defaultdict(list, {k: list(v) for k, v in state["metrics"].items()})
        self._steps = {}  # unknown until the checkpoint's record of them is restored
        self.current_epoch = int(state["epoch"])


@contextlib.contextmanager
def last_trained_epoch(history: object, standalone: bool) -> Iterator[None]:
    """While a ``standalone`` ``evaluate()`` (not one inside ``train()``) runs after
    training, ``history.current_epoch`` is the last epoch trained (the weights it measures),
    not the next one, which has not started. A history of another kind is left as it is."""
    core = history if standalone and isinstance(history, RunHistory) else None
    state = core._state if core is not None else None
    shift = int(state is not None and state.epoch > 0 and state.batches_seen_in_epoch == 0)
    if core is not None:
        core._epoch -= shift
    try:
        yield
    finally:
        if core is not None:
            core._epoch += shift


class EpochLosses:
    """The batch losses of one epoch on this process, reduced to a per-sample mean at its end.

    Losses are kept as detached tensors (no device sync per step). A checkpoint holds the
    losses of an unfinished epoch (:meth:`state_dict`); after :meth:`load_state_dict` the
    next :meth:`start_epoch` begins with them, so a resumed epoch's mean covers every batch.
    """

    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []
        self.counts: list[int] = []
        self._resumed: tuple[list[torch.Tensor], list[int]] | None = None

    def start_epoch(self) -> None:
        """Empty, or the losses restored from a checkpoint of this unfinished epoch."""
        self.losses, self.counts = self._resumed or ([], [])
        self._resumed = None

    def add(self, loss: torch.Tensor, batch_size: int) -> None:
        """Record one batch's mean loss and its number of samples."""
        self.losses.append(loss.detach())
        self.counts.append(int(batch_size))

    def replace_last(self, loss: torch.Tensor) -> None:
        """Replace the last recorded loss (a micro-step that was redone)."""
        self.losses[-1] = loss.detach()

    def mean(self, device: torch.device) -> float:
        """Per-sample mean over every process (collective); NaN when nothing was recorded.

        The float64 quotient of the float32 sums, not rounded to float32: AIToolbox's own
        tests compare means of runs with and without accumulation to 6 places, which a
        float32 rounding (one step of 2.4e-7 near 2.4) can put apart."""
        if self.losses:
            # Losses restored from a checkpoint sit on the CPU; the epoch's own ones on device.
            losses = torch.stack(
                [t.float() if t.device == device else t.float().to(device) for t in self.losses]
            )
            counts = torch.tensor(self.counts, dtype=torch.float32, device=device)
            totals = torch.stack([(losses * counts).sum(), counts.sum()])
        else:
            totals = torch.zeros(2, device=device)
        total, count = dist.reduce(totals, op="sum", check=False).tolist()  # one copy to the host
        return total / count if count > 0 else math.nan

    def state_dict(self) -> dict[str, Any]:
        """This process's losses so far (a tensor on the CPU) and batch sizes."""
        if not self.losses:
            return {"losses": torch.zeros(0), "counts": self.counts}
        # Stacked on the newest loss's device, then copied to the host once (restored
        # losses sit on the CPU; the epoch's own ones on the device).
        device = self.losses[-1].device
        stacked = torch.stack([t.float().to(device) for t in self.losses]).cpu()
        return {"losses": stacked, "counts": self.counts}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Keep saved losses for the next :meth:`start_epoch`."""
        losses = state.get("losses")
        kept = list(losses.unbind(0)) if isinstance(losses, torch.Tensor) else []
        self._resumed = (kept, [int(c) for c in state.get("counts") or []])


def module_modes(model: nn.Module) -> list[tuple[nn.Module, bool]]:
    """Each submodule's training flag, for :func:`restore_modes` after an evaluation.

    ``model.train(was_training)`` would set every submodule to one mode, switching a part
    the user keeps in eval mode while training (a frozen BatchNorm) back to training.
    """
    return [(module, module.training) for module in model.modules()]


def restore_modes(modes: list[tuple[nn.Module, bool]]) -> None:
    """Put back the training flags :func:`module_modes` saved."""
    for module, training in modes:
        module.training = training
