"""The Trainer: scramjet's one training loop, written as named, overridable hooks.

Read :meth:`Trainer.train` and :meth:`Trainer._run_train_epoch` top to bottom: every
step of the loop is a public method that does one thing (the order is drawn in
:mod:`scramjet.callbacks.base`). Subclass and override a hook to change *how* a step is
computed; add a callback (see :mod:`scramjet.callbacks`) for infrastructure such as
logging, progress, checkpoints and stopping. Callbacks read the Trainer's public
attributes and properties only.

What the Trainer delegates: the data order (seed, per-epoch order, mid-epoch skip) to
:class:`~scramjet.trainer.data_order.DataOrder`; argument checks to
:mod:`scramjet.trainer.checks`; what a checkpoint holds to :mod:`scramjet.checkpoint.resume`;
devices, precision and collectives to :mod:`scramjet.runtime`.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, cast

import torch
from torch import nn
from torch.utils.data import Dataset

from scramjet.callbacks import DEFAULT_CALLBACKS
from scramjet.callbacks.base import CallbackHandler, Event, StopTrainingError, TrainerCallback
from scramjet.checkpoint import resume
from scramjet.checkpoint.manager import CheckpointManager
from scramjet.runtime import distributed as dist
from scramjet.runtime import fsdp
from scramjet.runtime.devices import default_device, move_to_device
from scramjet.runtime.precision import autocast_context, make_grad_scaler, resolve_precision
from scramjet.runtime.processes import fit_socket_tempdir
from scramjet.runtime.seeding import get_rng_states, seed_everything, set_rng_states
from scramjet.schedulers import (
    adopt_new_learning_rates,
    check_step_takes_no_arguments,
    resolve_placeholders,
)
from scramjet.tracking._interrupts import keep_ctrl_c, raise_lost_ctrl_c
from scramjet.tracking.metric_log import MetricLog
from scramjet.trainer import _evaluation, _predict, _rerun
from scramjet.trainer._epoch_data import ReleasedOnError
from scramjet.trainer._explain import explain_batch_error
from scramjet.trainer._rank_stops import RankStops
from scramjet.trainer.batch import (
    batch_size_of,
    call_model,
    compute_loss,
    split_batch,
    tensor_loss,
)
from scramjet.trainer.checks import (
    build_scheduler,
    check_batch_size,
    check_batched_targets,
    check_dataset,
    check_device,
    check_loss,
    check_not_empty,
    check_optimizer,
    check_samples,
    check_scheduler_fn,
    check_scheduler_optimizer,
    check_train_args,
    check_trainer_args,
    check_yields_batches,
    loader_batch_size,
    warn_zero_learning_rate,
)
from scramjet.trainer.data_order import (
    DataOrder,
    check_ready_loader,
    even_end,
    safe_len,
    warn_length_fell_short,
    yields_batches,
)
from scramjet.trainer.state import (
    EpochLosses,
    RunConfig,
    RunHistory,
    TrainState,
    plan_run,
)
from scramjet.trainer.wrapping import rewrap_if_trainable_changed, trainable

#: What ``train``, ``evaluate`` and ``predict`` take: a map-style dataset or an iterable.
DataSource = Dataset[Any] | Iterable[Any]

#: Name of the class attribute by which a module offers to redo a training step whose
#: backward pass failed: a callable ``(model, error) -> context manager`` (the models of
#: :func:`scramjet.accel.accelerate_model` have one). :meth:`Trainer.recover_backward_step`
#: uses it; without one it re-raises.
BACKWARD_RECOVERY = "__scramjet_backward_recovery__"


class Scheduler(Protocol):
    """What the Trainer needs of a learning-rate scheduler (any ``torch.optim`` one fits)."""

    def step(self) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


class Trainer:
    """Trains, evaluates and predicts with a PyTorch model.

    Args:
        model: the ``nn.Module`` to train.
        loss_func: called as ``loss_func(model_outputs, targets)``; returns a scalar tensor.
        optimizer: a ``torch.optim.Optimizer`` over the model's parameters.
        callbacks: callback instances (or classes, instantiated per Trainer); defaults to
            ``DEFAULT_CALLBACKS`` (metric logging, progress bar, NaN guard, moving modules
            to the device); ``None`` means the same, ``[]`` none at all.
        run_history: where metrics are recorded; a new :class:`RunHistory` by default.
        precision: ``"no"``, ``"bf16"`` or ``"fp16"`` (autocast via ``torch.amp``; fp16
            uses a GradScaler). ``None`` reads ``ACCELERATE_MIXED_PRECISION`` (set by
            ``accelerate launch``), else full precision.
        seed: if given, seeds Python, NumPy and torch now and makes shuffling and
            DataLoader workers reproducible. Nothing is seeded otherwise. The model was
            built before the Trainer, so its initial weights are not covered: for a fully
            reproducible run call ``scramjet.seed_everything(seed)`` before building it.
        device: a device to use instead of the automatic CUDA → MPS → CPU choice.

    Example:
        >>> import torch
        >>> from torch.utils.data import TensorDataset
        >>> model = torch.nn.Linear(4, 2)
        >>> trainer = Trainer(model, torch.nn.CrossEntropyLoss(),
        ...                   torch.optim.SGD(model.parameters(), lr=0.1), callbacks=(), seed=0)
        >>> data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
        >>> trainer.train(data, num_epochs=2, per_device_batch_size=8)
        >>> len(trainer.run_history.get_metric_values("train_loss_epoch"))
        2
    """

    #: Extra callback event names a subclass fires with ``self.callback_handler.call_event``.
    custom_events: tuple[str, ...] = ()

    def __init__(
        self,
        model: nn.Module,
        loss_func: Callable[..., torch.Tensor] | None,
        optimizer: torch.optim.Optimizer,
        callbacks: Iterable[TrainerCallback | type[TrainerCallback]] | None = DEFAULT_CALLBACKS,
        run_history: RunHistory | None = None,
        *,
        precision: str | None = None,
        seed: int | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"model must be a torch.nn.Module; received {type(model).__name__}. "
                f"Wrap your network in an nn.Module subclass."
            )
        fsdp.check_sharded_optimizer(optimizer, model)
        check_optimizer(optimizer, model)
        check_trainer_args(loss_func, callbacks)
        # What the user gave.
        self.model: nn.Module = model  # the module called in a step (wrapped in a run, e.g. DDP)
        self.loss_func = loss_func
        self.optimizer = optimizer
        self.precision = resolve_precision(precision)
        self.seed = seed
        if seed is not None:
            seed_everything(seed)
        dist.init_distributed()
        fit_socket_tempdir()  # DataLoader workers on Python < 3.13 and a long TMPDIR
        self.device = check_device(device) if device is not None else default_device()
        self.run_history = run_history if run_history is not None else RunHistory()
        # What a run sets and changes; public unless only the loop itself may touch it.
        self.state = TrainState()
        self.scheduler: Scheduler | None = None
        self._rates_at_end: list[float | None] | None = None  # the groups' rates when a run ended
        self.scaler: torch.amp.GradScaler | None = make_grad_scaler(
            self.precision, self.device.type
        )
        self.stop_reason: StopTrainingError | None = None
        self.train_dataset: DataSource | None = None
        self.eval_dataset: DataSource | None = None
        self.collate_fn: Callable[..., Any] | None = None
        self._train_collate_fn: Callable[..., Any] | None = None  # evaluate/predict default
        self._collate_carried = True  # collate_fn is train()'s, not an evaluate/predict one
        self.data_order = DataOrder(seed)
        self.train_losses = EpochLosses()
        self.eval_losses = EpochLosses()
        self._run_config: RunConfig | None = None
        self._unwrapped_model = model
        self._sharded = fsdp.is_sharded(model)  # FSDP2: sharded in place before the Trainer
        self._create_scheduler_fn: Callable[..., Any] | None = None
        self._train_dl: Iterable[Any] | None = None
        self._eval_dl: Iterable[Any] | None = None
        self._evaluate_dl: Iterable[Any] | None = None  # the last standalone evaluate()'s
        self._current_dl: Iterable[Any] | None = None
        self._batches_in_epoch = 0
        self._in_training_run = False
        self._end_epoch_requested = False
        self._rank_stops: RankStops | None = None  # across processes: stops held until agreed
        self._in_train_batches = False  # trainer.log: a step value now (see log_dict)
        self._epoch_eval = False  # the evaluation running is the epoch's own
        self._epoch_cut = False  # the run stopped before the epoch's last batch
        self._length_warned = False  # the training data outran its length (warned once a run)
        self.eval_label = "eval"  # what progress displays call an evaluation pass
        self._step_events = (False, False)  # whether any callback handles step start / end
        self.metric_log, self._step_in_progress = MetricLog(), 0  # trainer.log's receiver
        chosen = DEFAULT_CALLBACKS if callbacks is None else callbacks
        self.callback_handler = CallbackHandler(chosen, custom_events=self.custom_events)
        self.callback_handler.call_event(Event.INIT_END, self)

    # ------------------------------------------------------------------ what callbacks read
    @property
    def callbacks(self) -> list[TrainerCallback]:
        """The registered callbacks, in call order."""
        return self.callback_handler.callbacks

    @property
    def unwrapped_model(self) -> nn.Module:
        """The user's model, without the wrapper of :meth:`wrap_model` (e.g. DDP).

        A model sharded with FSDP is sharded in place: it is its own unwrapped model.
        """
        return self._unwrapped_model

    @property
    def run_config(self) -> RunConfig:
        """Settings of the current (or last) run, fixed when ``train()``/``evaluate()`` starts.

        Raises:
            RuntimeError: read before any ``train()`` or ``evaluate()``.
        """
        if self._run_config is None:
            raise RuntimeError(
                "trainer.run_config is set when train() or evaluate() starts; read it from a "
                "callback event of the run, or after the run."
            )
        return self._run_config

    @run_config.setter
    def run_config(self, value: RunConfig) -> None:
        self._run_config = value

    @property
    def has_run_config(self) -> bool:
        """Whether a ``train()`` or ``evaluate()`` has set :attr:`run_config`."""
        return self._run_config is not None

    @property
    def in_training_run(self) -> bool:
        """True while ``train()`` runs (False in a standalone ``evaluate()``/``predict()``)."""
        return self._in_training_run

    @property
    def train_dataloader(self) -> Iterable[Any] | None:
        """The training loader of the current (or last) ``train()``; None before."""
        return self._train_dl

    @property
    def eval_dataloader(self) -> Iterable[Any] | None:
        """The evaluation loader of ``train(eval_dataset=...)``; None without one."""
        return self._eval_dl

    @property
    def current_dataloader(self) -> Iterable[Any] | None:
        """The loader being iterated now (training, evaluation or prediction); None between."""
        return self._current_dl

    @property
    def batches_in_epoch(self) -> int:
        """Micro-batches in the current training epoch, resumed ones included; 0 if unknown."""
        return self._batches_in_epoch

    @property
    def is_main_process(self) -> bool:
        """True on the process that should log and write files (rank 0)."""
        return dist.is_main_process()

    @property
    def num_processes(self) -> int:
        """Number of processes taking part in the run."""
        return dist.get_world_size()

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` on the main process only."""
        if self.is_main_process:
            print(*args, **kwargs)

    def add_callback(self, callback: TrainerCallback | type[TrainerCallback]) -> None:
        """Register another callback after construction.

        Construction has ended, so the new callback's ``on_init_end`` (if it has one) runs
        now: callbacks that prepare the model there (``ConvertSyncBatchNormCallback``) act
        the same whether given to the constructor or added later.
        """
        added = self.callback_handler.add_callback(callback)
        if type(added).on_init_end is not TrainerCallback.on_init_end:
            added.on_init_end(self)

    def replace_model(self, model: nn.Module) -> None:
        """Train ``model`` from now on, in place of the current one.

        For training modifiers that rebuild the model before training, such as
        ``ConvertSyncBatchNormCallback``; the optimizer must already hold ``model``'s
        parameters.

        Raises:
            RuntimeError: the current model is already wrapped for distributed training.
        """
        if self.model is not self._unwrapped_model:
            raise RuntimeError(
                f"replace_model() received a model after the current one was wrapped for "
                f"distributed training ({type(self.model).__name__}); replace it before the "
                f"first train(), e.g. from a callback's on_init_end."
            )
        self.model = self._unwrapped_model = model
        self._sharded = fsdp.is_sharded(model)

    def log(
        self, name: str, value: Any, step: int | None = None, *, reduce: str | None = None
    ) -> None:
        """Log a value to every tracker: in the training batches, at the update in progress
        (dropped at once when no tracker listens); elsewhere, to ``run_history`` per epoch.
        ``reduce`` (``"mean"``, ``"sum"``, ``"max"``, ``"min"``) combines it over processes."""
        self.log_dict({name: value}, step, reduce=reduce)

    def log_dict(
        self, values: Mapping[str, Any], step: int | None = None, *, reduce: str | None = None
    ) -> None:
        """Log several values, as :meth:`log` (see :mod:`scramjet.tracking.metric_log`)."""
        in_batches = self._in_train_batches
        at = max(self._step_in_progress, self.state.global_step) if in_batches else None
        self.metric_log.log(self, values, step, reduce, at)

    # ------------------------------------------------------------------ setup hooks
    def get_default_train_dl_kwargs(self, batch_size: int) -> dict[str, Any]:
        """DataLoader settings used unless ``train_dataloader_kwargs`` overrides them."""
        return {
            "shuffle": True,
            "pin_memory": self.device.type == "cuda",
            "batch_size": batch_size,
            "num_workers": 0,
            "drop_last": False,
        }

    def get_default_eval_dl_kwargs(self, batch_size: int) -> dict[str, Any]:
        """DataLoader settings used unless ``eval_dataloader_kwargs`` overrides them."""
        return {
            "shuffle": False,
            "pin_memory": self.device.type == "cuda",
            "batch_size": batch_size,
            "num_workers": 0,
        }

    def create_train_dataloader(
        self, batch_size: int, train_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """Build the training DataLoader.

        The order depends only on the run's seed and the epoch (see :attr:`data_order`),
        which is what lets a run resume mid-epoch without replaying data; across processes
        each rank gets its own share (like ``DistributedSampler``), reshuffled every epoch.
        """
        if yields_batches(self.train_dataset):  # a DataLoader or generator: used as given
            self._check_ready_loader(
                self.train_dataset, "train_dataset", train_dl_kwargs, self.collate_fn
            )
            return cast(Iterable[Any], self.train_dataset)
        kwargs = {**self.get_default_train_dl_kwargs(batch_size), **(train_dl_kwargs or {})}
        if self.collate_fn is not None:  # train(collate_fn=...) wins over the kwargs' one
            kwargs["collate_fn"] = self.collate_fn
        shuffle = bool(kwargs.pop("shuffle"))
        return self.data_order.train_loader(self.train_dataset, kwargs, shuffle=shuffle)

    def create_eval_dataloader(
        self, batch_size: int, eval_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """Build the evaluation DataLoader: each rank takes ``r, r + W, ...``, no padding.

        A ``DataLoader`` or a generator of batches is used as given.
        """
        if yields_batches(self.eval_dataset):
            # the last train()'s collate_fn, carried over, is for datasets: not counted here
            given = None if self._collate_carried else self.collate_fn
            self._check_ready_loader(
                self.eval_dataset, "the evaluation data", eval_dl_kwargs, given
            )
            return cast(Iterable[Any], self.eval_dataset)
        kwargs = {**self.get_default_eval_dl_kwargs(batch_size), **(eval_dl_kwargs or {})}
        kwargs.pop("shuffle", None)
        # A collate_fn argument wins over the kwargs' one; the training one carried over
        # from train() does not (a mixup collate must not batch the evaluation).
        carried = self._collate_carried and "collate_fn" in (eval_dl_kwargs or {})
        if self.collate_fn is not None and not carried:
            kwargs["collate_fn"] = self.collate_fn
        return self.data_order.eval_loader(self.eval_dataset, kwargs)

    def create_scheduler(self) -> Scheduler | None:
        """Build the scheduler from ``create_scheduler_fn`` with placeholders resolved."""
        if self._create_scheduler_fn is None:
            return None
        rc = self.run_config
        values = {
            "num_epochs": rc.num_epochs,
            "num_update_steps_per_epoch": rc.num_update_steps_per_epoch,
            "total_update_steps": rc.total_update_steps,
            "per_process_batch_size": rc.train_per_device_batch_size,
            "eval_per_process_batch_size": rc.eval_per_device_batch_size,
            "gradient_accumulation_steps": rc.gradient_accumulation_steps,
            "num_processes": rc.num_processes,
            "train_dataloader_len": safe_len(self._train_dl),
            "eval_dataloader_len": safe_len(self._eval_dl),
        }
        lengths = ("num_update_steps_per_epoch", "total_update_steps", "train_dataloader_len")
        unknown = frozenset(k for k in lengths if values[k] == 0)  # no length: not countable
        fn = self._create_scheduler_fn
        resolved = resolve_placeholders(fn, values, unknown)
        scheduler: Scheduler = build_scheduler(fn, resolved, self.optimizer)
        check_scheduler_optimizer(scheduler, self.optimizer)
        if type(self).scheduler_step is Trainer.scheduler_step:  # an override may pass values
            check_step_takes_no_arguments(scheduler)
        return scheduler

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Wrap the model for training across processes (at ``train()``, if not wrapped yet).

        The default wraps it in ``DistributedDataParallel`` when more than one process
        runs, and leaves it as it is in one process or when it is sharded with FSDP
        (:func:`scramjet.runtime.shard_model` / ``fully_shard``), which needs no wrapper.
        Override to use another wrapper; :attr:`unwrapped_model` keeps the plain module.
        """
        return dist.wrap_data_parallel(model, self.device)

    def release_distributed_wrapper(self) -> None:
        """Drop the wrapper of :meth:`wrap_model` (the next ``train()`` wraps again).

        :func:`scramjet.runtime.destroy_distributed` calls it before ending the process
        group: a DDP wrapper that outlives the group can hang the process when freed.
        """
        self.model = self._unwrapped_model

    # ------------------------------------------------------------------ run hooks
    def training_run_start(self) -> None:
        """Start of ``train()``: hook for subclasses (the default does nothing)."""

    def training_run_end(self) -> None:
        """End of ``train()``: hook for subclasses (the default does nothing)."""

    def training_run_epoch_end(self) -> None:
        """End of one epoch of ``train()`` (after its evaluation): hook for subclasses.

        Runs before ``on_training_run_epoch_end``; the default does nothing.
        """

    def evaluation_run_start(self) -> None:
        """Start of an evaluation run: hook for subclasses (the default does nothing)."""

    def evaluation_run_end(self) -> None:
        """End of an evaluation run: hook for subclasses (the default does nothing)."""

    # ------------------------------------------------------------------ step hooks
    def train_epoch_start(self) -> None:
        """Put the model in training mode (the loop has reset :attr:`train_losses`)."""
        self.model.train()

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        """Forward pass and loss for one batch.

        ``(inputs, targets)`` calls ``model(inputs)`` and ``loss_func(outputs, targets)``; a
        dict batch calls ``model(**batch)`` and uses the output's own ``loss`` (Hugging
        Face models) or ``loss_func`` on its logits and the batch's ``labels``/``targets``;
        see :mod:`scramjet.trainer.batch`.

        Returns:
            ``{"loss": scalar tensor (mean over the batch), "model_outputs": ...,
            "batch_size": int}``. An override may add ``"num_items_in_batch"`` when its
            loss is a sum divided by the items (e.g. tokens) of every process: the loop
            then multiplies the loss by the number of processes, which undoes the mean
            that DDP takes of the gradients.
        """
        return self._batch_loss(batch, "calculate_train_batch_loss")

    def backward_step(self, loss: torch.Tensor) -> None:
        """Backpropagate ``loss`` (with fp16 loss scaling when a GradScaler is in use).

        With gradient accumulation the loop passes each micro-batch's mean loss already
        divided by the number of micro-batches in its window (the last window of an epoch
        may be shorter), so an update averages its window's batches rather than summing
        them. An override that calls ``loss.backward()`` keeps that averaging.
        """
        if self.scaler is not None:
            loss = self.scaler.scale(loss)
        loss.backward()

    def recover_backward_step(
        self, error: Exception, batch: Any, *, window: int, first_in_window: bool
    ) -> dict[str, Any]:
        """``backward_step`` raised ``error``: redo the micro-step, or re-raise (the default).

        The default re-raises, unless a module of the model offers a recovery (the class
        attribute named by ``BACKWARD_RECOVERY``; models accelerated with
        :func:`scramjet.accel.accelerate_model` have one, which undoes the failed forward's
        side effects and drops the backend that failed). The redo clears the gradients
        (the failed backward may have written part of them), so earlier micro-batches of
        an accumulation window are left out of this one update. In a distributed run the
        error is raised: the other ranks already wait in this step's all-reduce.

        Returns:
            The redone step's ``batch_output``.
        """
        recovery = _backward_recovery(self._unwrapped_model)
        if recovery is None or dist.get_world_size() > 1:
            raise error
        with recovery(self._unwrapped_model, error):
            self.optimizer.zero_grad(set_to_none=True)
            if not first_in_window:
                warnings.warn(
                    "An accelerated backend failed in backward in the middle of a gradient "
                    "accumulation window; the window's earlier micro-batches are left out of "
                    "this update.",
                    RuntimeWarning,
                    stacklevel=4,
                )
            with self._autocast():
                batch_output = self.calculate_train_batch_loss(batch)
            self.train_losses.replace_last(batch_output["loss"])
            self.backward_step(self._backward_loss(batch_output, window))
        return batch_output

    def clip_gradients(self) -> None:
        """Clip gradients once per optimizer update (value and/or norm), after unscaling."""
        rc = self.run_config
        if rc.gradient_clip_value is None and rc.gradient_clip_norm is None:
            return
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if rc.gradient_clip_value is not None:
            nn.utils.clip_grad_value_(params, rc.gradient_clip_value)
        if rc.gradient_clip_norm is not None:
            nn.utils.clip_grad_norm_(params, rc.gradient_clip_norm)

    def optimizer_step(self) -> None:
        """Apply the accumulated gradients."""
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def scheduler_step(self) -> None:
        """Advance the scheduler once per optimizer update (called only when there is one)."""
        if self.scheduler is not None:
            self.scheduler.step()

    def optimizer_zero_grad(self) -> None:
        """Reset gradients after an update."""
        self.optimizer.zero_grad(set_to_none=True)

    def train_epoch_end(self) -> None:
        """Record ``train_loss_epoch``: the mean loss per sample, over all processes."""
        self.run_history.update_metric("train_loss_epoch", self.train_losses.mean(self.device))

    def eval_epoch_start(self) -> None:
        """Put the model in evaluation mode (the loop has reset :attr:`eval_losses`)."""
        self.model.eval()

    def calculate_eval_batch_loss(self, batch: Any) -> dict[str, Any]:
        """Forward pass and loss for one evaluation batch (run under ``torch.no_grad``).

        The same batches and outputs as :meth:`calculate_train_batch_loss` are understood.
        """
        return self._batch_loss(batch, "calculate_eval_batch_loss")

    def eval_epoch_end(self) -> None:
        """Record ``eval_loss_epoch``: the mean loss per sample, over all processes."""
        self.run_history.update_metric("eval_loss_epoch", self.eval_losses.mean(self.device))

    def predict_step(self, batch: Any) -> Any:
        """Model outputs for one batch.

        Inputs are ``batch[0]`` for tuples and lists, ``model(**batch)`` for a dict batch
        (without its target keys, unless ``forward`` requires them), and the batch itself
        otherwise.
        """
        if isinstance(batch, Mapping):
            return call_model(self.model, batch, with_targets=False)
        return self.model(batch[0] if isinstance(batch, list | tuple) else batch)

    # ------------------------------------------------------------------ training
    def train(
        self,
        train_dataset: DataSource,
        num_epochs: int,
        eval_dataset: DataSource | None = None,
        per_device_batch_size: int = 8,
        max_num_train_steps: int | None = None,
        gradient_accumulation_steps: int = 1,
        gradient_clip_value: float | None = None,
        create_scheduler_fn: Callable[..., Any] | None = None,
        train_dataloader_kwargs: Mapping[str, Any] | None = None,
        eval_dataloader_kwargs: Mapping[str, Any] | None = None,
        reset_run_history: bool = True,
        collate_fn: Callable[..., Any] | None = None,
        resume_from: str | os.PathLike[str] | None = None,
        *,
        gradient_clip_norm: float | None = None,
        eval_per_device_batch_size: int | None = None,
    ) -> None:
        """Train for ``num_epochs`` epochs, or for ``max_num_train_steps`` optimizer updates.

        ``max_num_train_steps``, when given, overrides ``num_epochs`` as in
        pytorch-accelerated: the run lasts ``ceil(max_num_train_steps / updates per epoch)``
        epochs and stops after exactly that many updates. For a dataset without a length
        both bound the run. A ``batch_size`` in ``train_dataloader_kwargs`` (or
        ``eval_dataloader_kwargs``) takes precedence over the batch-size argument, as in
        pytorch-accelerated, and is the one the run records.

        A second ``train()`` continues from the model's and optimizer's current state; its
        counters start at 0, the run history is cleared unless ``reset_run_history=False``,
        and its scheduler comes from its own ``create_scheduler_fn`` (without one, the
        optimizer keeps the rate the last scheduler set).

        ``resume_from`` takes a checkpoint file, or a directory of checkpoints whose
        latest good one is used (either may be a URL such as ``s3://...``), or ``"auto"``:
        the newest good checkpoint of the ``SaveTrainingStateCallback`` folder, or a
        fresh start when there is none. It continues at the exact optimizer step it was saved
        at (mid-epoch included), restoring model, optimizer, scheduler, scaler, counters,
        history, callback state, data order and RNG states.
        """
        check_train_args(
            train_dataset, eval_dataset, num_epochs, per_device_batch_size,
            eval_per_device_batch_size, max_num_train_steps, gradient_accumulation_steps,
            gradient_clip_value, gradient_clip_norm,
        )  # fmt: skip
        check_scheduler_fn(create_scheduler_fn)
        eval_bs = loader_batch_size(
            eval_dataloader_kwargs, eval_per_device_batch_size or per_device_batch_size,
            "eval_dataloader_kwargs",
        )  # fmt: skip
        per_device_batch_size = loader_batch_size(
            train_dataloader_kwargs, per_device_batch_size, "train_dataloader_kwargs"
        )
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.collate_fn = self._train_collate_fn = collate_fn
        self._collate_carried = True
        self._create_scheduler_fn = create_scheduler_fn
        # The last run ended inside an epoch it cut short (a stop, the step limit) after that
        # epoch's end events: a history kept across runs numbers the next epoch after it
        # (a history of the user's own counts epochs itself, with their end events).
        after_cut = self._epoch_cut and not reset_run_history
        after_cut &= isinstance(self.run_history, RunHistory)
        self.state, self.stop_reason = TrainState(), None
        self._length_warned = self._epoch_cut = False
        if reset_run_history:
            self.run_history.reset()
        self.run_history.follow(self.state)
        if after_cut:
            self.run_history._increment_epoch()
        self.data_order.new_run()
        self.train_losses = EpochLosses()
        self._prepare_model_for_training()
        train_dl = self.create_train_dataloader(per_device_batch_size, train_dataloader_kwargs)
        check_yields_batches(train_dl, train_dataset, per_device_batch_size)
        self._train_dl, self._eval_dl, self._evaluate_dl = train_dl, None, None
        if eval_dataset is not None:
            self._eval_dl = self.create_eval_dataloader(eval_bs, eval_dataloader_kwargs)
        self._run_config = self._create_run_config(
            num_epochs, per_device_batch_size, eval_bs, max_num_train_steps,
            gradient_accumulation_steps, (gradient_clip_value, gradient_clip_norm),
        )  # fmt: skip
        adopt_new_learning_rates(
            self.optimizer, self._rates_at_end, self._create_scheduler_fn is not None
        )
        self.scheduler = self.create_scheduler()
        if resume_from is not None:
            resume.restore(self, resume_from, check_plan=True)
            _rerun.check_resumed(self, resume_from)
        try:
            with keep_ctrl_c():  # a Ctrl-C that a finalizer swallowed still stops the run
                self._run_training(train_dl)
        finally:  # a rate that differs at the next train() was set by hand
            self._rates_at_end = [group.get("lr") for group in self.optimizer.param_groups]

    def _run_training(self, train_dl: Iterable[Any]) -> None:
        # Drop gradients left over from before the run; not the hook, so hooks run exactly
        # in the documented order (optimizer_zero_grad only after an update).
        self.optimizer.zero_grad(set_to_none=True)
        self._in_training_run = True
        self._hold_stops(dist.is_distributed())
        try:
            self.training_run_start()
            self.callback_handler.call_event(
                Event.TRAINING_RUN_START, self, agree=self._agreement("at its start")
            )
            _rerun.start_planned_run(self)  # a rerun of a run stop_training() ended stops here
            while self.state.epoch < self.run_config.num_epochs and not self._reached_max_steps():
                if not self.state.train_done:  # saved at the epoch's training end: resume after it
                    self._run_train_epoch(train_dl)
                if self._eval_dl is not None and not self.state.eval_done:
                    # a cut epoch goes on after a resume: this pass must not move its RNGs
                    rng_states = get_rng_states() if self._epoch_cut else None
                    self._epoch_eval = True  # marks state.eval_done at its end
                    _evaluation.run_evaluation(self, self._eval_dl)
                    if rng_states is not None:
                        set_rng_states(rng_states)
                # An epoch cut short by a stop or the step limit is not finished: its state
                # (and a checkpoint saved now) stays inside it, so a resume continues it.
                self.state.epoch_finished = not self._epoch_cut
                self.training_run_epoch_end()
                self._epoch_end_event()
                warn_zero_learning_rate(self)  # once per run, after its first epoch
                self.state.epoch_finished = False
                if self._epoch_cut:
                    break
                self.state.epoch += 1
                self.state.batches_seen_in_epoch = 0
                self.state.train_done = self.state.eval_done = False
                if self.state.stop_requested:
                    break
        except StopTrainingError as err:
            # kept without its frames: they hold the epoch's loader (and its worker processes)
            self.stop_reason = err.with_traceback(None)
            self._hold_stops(False)
            self.callback_handler.call_event(Event.STOP_TRAINING_ERROR, self, error=err)
        except BaseException:
            self._close_after_crash()
            raise
        self._hold_stops(False)
        try:
            self.training_run_end()
            self.callback_handler.call_event(Event.TRAINING_RUN_END, self)
        except BaseException:
            self._close_after_crash()
            raise
        self._in_training_run = False
        if self.stop_reason is not None and self.stop_reason.reraise:
            raise self.stop_reason

    def _epoch_end_event(self) -> None:
        """``TRAINING_RUN_EPOCH_END``. Across processes, the ranks agree on a stop raised by
        its callbacks (early stopping on a value each rank holds for itself) or held since
        (see ``_rank_stops.py``), before the epoch's checkpoint is written: a rank that
        stops alone would leave the others training into a closed process group."""
        agree = self._agreement(f"after epoch {self.state.epoch + 1}")
        self.callback_handler.call_event(Event.TRAINING_RUN_EPOCH_END, self, agree=agree)

    def _hold_stops(self, hold: bool) -> None:
        """Across processes, from the run's start to its end: stops asked for on one rank
        are held until every rank agrees (``_rank_stops.py``). Off: the vote in flight ends."""
        if self._rank_stops is not None:
            self._rank_stops.finish()
        self._rank_stops = stops = RankStops(self) if hold else None
        self.callback_handler.hold_stop = stops.hold if stops is not None else None

    def _agreement(
        self, where: str
    ) -> Callable[[StopTrainingError | None], StopTrainingError | None] | None:
        stops = self._rank_stops
        if stops is None:
            return None
        return lambda stop: stops.agree_now(stop, where)

    def _close_after_crash(self) -> None:
        """A crash (at the run's start, in an epoch or at its end): callbacks release
        threads, displays and run folders before the error goes on. The epoch's flags go
        too: a pending end_epoch() would end the next run's first epoch at its first batch."""
        self._in_training_run = self._in_train_batches = self._end_epoch_requested = False
        self._current_dl = None
        self._rank_stops = self.callback_handler.hold_stop = None  # no vote: ranks may differ
        self.callback_handler.close_all(self)

    def _run_train_epoch(self, train_dl: Iterable[Any]) -> None:
        state, accum = self.state, self.run_config.gradient_accumulation_steps
        batches, n_batches = self.data_order.epoch_batches(
            train_dl,
            self.train_dataset,
            epoch=state.epoch,
            skip=state.batches_seen_in_epoch,
            batch_size=self.run_config.train_per_device_batch_size,
        )
        if not n_batches and dist.get_world_size() > 1:  # unknown lengths may differ by rank
            batches = even_end(batches)
        self._batches_in_epoch, self._current_dl = n_batches, train_dl
        self.train_losses.start_epoch()
        self.train_epoch_start()
        self.callback_handler.call_event(Event.TRAIN_EPOCH_START, self)
        rewrap_if_trainable_changed(self)  # layers (un)frozen since: the run's start, hooks
        handler = self.callback_handler  # callbacks added mid-run take part from the next epoch
        self._step_events = (handler.has(Event.TRAIN_STEP_START), handler.has(Event.TRAIN_STEP_END))
        window, open_window, self._epoch_cut, self._in_train_batches = accum, False, False, True
        known, base = n_batches, 0  # the epoch's length (0: unknown); where windows start
        with ReleasedOnError(batches, train_dl) as stream:
            for batch in stream:
                raise_lost_ctrl_c()
                i = state.batches_seen_in_epoch
                if known and i >= known:  # the loader's length fell short (an estimate)
                    known, base = 0, known
                    if not self._length_warned:  # once per run
                        self._length_warned = True
                        warn_length_fell_short(n_batches, accum, train_dl)
                start = i - (i - base) % accum  # this micro-batch's window: [start, end)
                end = min(start + accum, known) if known else start + accum
                window, is_update = end - start, i + 1 == end
                batch_output = self._train_micro_step(
                    batch, window=window, first_in_window=i == start, is_update=is_update,
                    sync=is_update or not known,
                )  # fmt: skip
                state.batches_seen_in_epoch = i + 1
                state.samples_seen += batch_output["batch_size"]
                open_window = not is_update
                if is_update:
                    self._apply_update()
                    if self._reached_max_steps() or self._stop_after_update():
                        self._epoch_cut = not known or state.batches_seen_in_epoch < known
                        break
                if self._end_epoch_requested:
                    break
        if open_window:  # ended inside an accumulation window: end_epoch(), or unknown length
            self._close_window(window, held=(state.batches_seen_in_epoch - 1 - base) % accum + 1)
        self._end_epoch_requested = self._in_train_batches = False
        self._current_dl = None
        state.train_done = not self._epoch_cut  # a checkpoint saved from now on skips the batches
        self.train_epoch_end()
        self.callback_handler.call_event(Event.TRAIN_EPOCH_END, self)

    def _train_micro_step(
        self, batch: Any, *, window: int, first_in_window: bool, is_update: bool, sync: bool
    ) -> dict[str, Any]:
        """One micro-batch: device, forward and loss, step callbacks, backward (no update)."""
        handler, (has_start, has_end) = self.callback_handler, self._step_events
        self._step_in_progress = self.state.global_step + 1  # the update trainer.log refers to
        if self.device.type != "cpu":
            batch = move_to_device(batch, self.device, non_blocking=True)
        if has_start:
            handler.call_event(Event.TRAIN_STEP_START, self)
        with self._no_sync(not is_update):
            with self._autocast():
                try:
                    batch_output = self.calculate_train_batch_loss(batch)
                except (ValueError, RuntimeError, TypeError) as error:  # e.g. float64 inputs
                    explain_batch_error(error, self._unwrapped_model, batch, "training",
                                        self.state.batches_seen_in_epoch)  # fmt: skip
                    raise
            if self.state.batches_seen_in_epoch == 0 or self.state.global_step == 0:
                check_loss(batch_output, model=self._unwrapped_model)
            check_samples(batch_output, self.state.batches_seen_in_epoch + 1, self.state.epoch + 1)
            self.train_losses.add(batch_output["loss"], batch_output["batch_size"])
            if has_end:
                handler.call_event(
                    Event.TRAIN_STEP_END, self, batch=batch, batch_output=batch_output
                )
            if self._sharded:  # FSDP reduces inside the backward: sync on a window's last
                # micro-step, and on every one when the window's end is unknown
                fsdp.set_gradient_sync(self._unwrapped_model, sync or self._end_epoch_requested)
            try:
                self.backward_step(self._backward_loss(batch_output, window))
            except Exception as error:  # e.g. an accelerated backend failing in backward
                batch_output = self.recover_backward_step(
                    error, batch, window=window, first_in_window=first_in_window
                )
        return batch_output

    def _backward_loss(self, batch_output: Mapping[str, Any], window: int) -> torch.Tensor:
        loss: torch.Tensor = batch_output["loss"]
        if "num_items_in_batch" in batch_output:  # normalised by every process's items
            loss = loss * self.run_config.num_processes
        return loss / window if window != 1 else loss

    def _close_window(self, window: int, held: int) -> None:
        # The window's batches were divided by its full size; rescale so the update
        # averages the ``held`` batches it really has, then apply it.
        _scale_gradients(self.optimizer, window / held)
        if isinstance(self.model, nn.parallel.DistributedDataParallel):  # it ran under no_sync
            from scramjet.runtime._ddp import broadcast_buffers

            for p in self.model.parameters():
                if p.grad is not None:
                    p.grad = dist.reduce(p.grad, op="mean", check=False)
            # nor were the buffers broadcast after its forward: rank 0's BatchNorm statistics
            broadcast_buffers(self.model.module, self.model.process_group)
        self._apply_update()

    def _apply_update(self) -> None:
        if self._sharded:  # fully_shard leaves buffers per rank: rank 0's, as DDP here
            fsdp.sync_buffers(self._unwrapped_model)
        self.clip_gradients()
        scale = self.scaler.get_scale() if self.scaler is not None else 0.0
        adopt = getattr(self.scheduler, "adopt_new_groups", None)
        if adopt is not None:  # a group added mid-run: scheduled from its first update
            adopt()
        self.optimizer_step()
        # The hook only with a scheduler, as pytorch-accelerated; not after an update the
        # GradScaler skipped (inf/NaN gradients lower its scale), as HF accelerate.
        skipped = self.scaler is not None and self.scaler.get_scale() < scale
        if self.scheduler is not None and not skipped:
            self.scheduler_step()
        self.optimizer_zero_grad()
        self.state.global_step += 1
        self.callback_handler.call_event(Event.OPTIMIZER_STEP_END, self)

    def end_epoch(self) -> None:
        """Ask the loop to end the current train or eval epoch after the current batch.
        In training, an unfinished accumulation window is applied as an update first. Across
        processes, call it on every rank at the same batch (from a value every rank shares)."""
        self._end_epoch_requested = True

    def stop_training(self) -> None:
        """Ask the loop to stop after the current optimizer update (no error raised). The same
        run again with ``resume_from="auto"`` stops too, unless it plans more epochs or steps.
        Across processes, it acts at once on the rank that calls it: in an epoch, call it on
        every rank at the same step (from a value every rank shares), or raise
        :class:`StopTrainingError` from a callback, which the ranks agree on; asked for at
        an epoch's end (``on_train_epoch_end`` ...), it stops every rank after that epoch."""
        self.state.stop_requested = True

    def _stop_after_update(self) -> bool:
        """Whether the epoch stops after this update (``stop_training()``). Across processes,
        a callback's stop held on any rank is raised here once the ranks agreed on it."""
        if self.state.stop_requested or self._rank_stops is None:
            return self.state.stop_requested
        agreed = self._rank_stops.at_update()
        if agreed is not None:
            raise agreed
        return False

    def _reached_max_steps(self) -> bool:
        limit = self.run_config.max_num_train_steps
        return bool(limit and self.state.global_step >= limit)

    # ------------------------------------------------------------------ evaluation, prediction
    def evaluate(
        self,
        dataset: DataSource,
        per_device_batch_size: int = 8,
        dataloader_kwargs: Mapping[str, Any] | None = None,
        collate_fn: Callable[..., Any] | None = None,
    ) -> None:
        """Run one evaluation epoch over ``dataset``; ``eval_loss_epoch`` is recorded.
        Without ``collate_fn``, the one the last ``train()`` was given batches it. If it
        fails, callbacks release what they started (``close``), as after a failed ``train()``."""
        check_dataset(dataset, "dataset")
        check_not_empty(dataset, "dataset")
        check_batch_size(per_device_batch_size, "per_device_batch_size")
        per_device_batch_size = loader_batch_size(
            dataloader_kwargs, per_device_batch_size, "dataloader_kwargs"
        )
        self.eval_dataset, self.collate_fn = dataset, collate_fn or self._train_collate_fn
        self._collate_carried = collate_fn is None
        self._place_model()
        _evaluation.evaluate(self, dataset, per_device_batch_size, dataloader_kwargs)

    def run_evaluation(self) -> None:
        """Evaluate on the run's ``eval_dataset`` now (e.g. every N steps), then resume training."""
        if self._eval_dl is None:
            raise ValueError(
                "run_evaluation() needs train(..., eval_dataset=...) to be running; pass an "
                "eval_dataset to train(), or call evaluate(dataset) to evaluate other data."
            )
        _evaluation.evaluate_now(self, self._eval_dl)

    def predict(
        self,
        dataset: DataSource,
        per_device_batch_size: int = 8,
        dataloader_kwargs: Mapping[str, Any] | None = None,
        collate_fn: Callable[..., Any] | None = None,
    ) -> Any:
        """Model outputs for every sample of ``dataset``, in dataset order.

        Across processes, each rank predicts its share and the outputs are gathered on
        every rank without the sampler's padding (N samples → exactly N outputs).
        Tensors are concatenated along the first dimension (in float32 for fp16/bf16 ones of
        a mixed-precision run); other outputs, a list with one entry per batch. Across processes the data must be map-style (or a
        DataLoader with a :class:`ShardSampler`): a stream has no dataset order. Without
        ``collate_fn``, the one the last ``train()`` was given batches the data.
        """
        return _predict.predict(self, dataset, per_device_batch_size, dataloader_kwargs, collate_fn)

    def _collective_forwards(self) -> bool:
        """Whether every forward is a collective (FSDP across processes)."""
        return self._sharded and dist.is_distributed()

    # ------------------------------------------------------------------ checkpoints
    def training_state(self, *, include_optimizer: bool = True) -> dict[str, Any]:
        """Everything needed to resume, as entries for :class:`CheckpointManager`.

        Collective in a distributed run (every rank must call it): RNG states and the
        unfinished epoch's losses of all ranks are gathered, so each rank resumes with its
        own. See :mod:`scramjet.checkpoint.resume` for what is saved.
        """
        return resume.training_state(self, include_optimizer=include_optimizer)

    def save_checkpoint(
        self,
        save_path: str | os.PathLike[str],
        checkpoint_kwargs: dict[str, Any] | None = None,
        save_optimizer: bool = True,
    ) -> None:
        """Write the training state to one file, atomically (rank 0 writes; all ranks call).

        ``save_path`` may be a URL (``s3://bucket/run/last.pt``, ``gs://...``, ``file://...``):
        the file is staged locally and uploaded; a failed upload raises
        ``CheckpointWriteError`` and leaves whatever was at the URL unchanged.

        ``checkpoint_kwargs`` are extra plain values stored alongside (returned by
        :meth:`load_checkpoint`).
        """
        resume.save_file(self, save_path, checkpoint_kwargs or {}, save_optimizer)

    def save_to_manager(self, manager: CheckpointManager | None) -> Path | None:
        """Save the training state as the next checkpoint of ``manager`` (all ranks call).

        ``manager`` is None on the ranks that do not write; returns the written path on
        the one that does.
        """
        return resume.save_to_manager(self, manager)

    def load_checkpoint(
        self,
        checkpoint_path: str | os.PathLike[str],
        load_optimizer: bool = True,
        *,
        load_training_state: bool = True,
    ) -> dict[str, Any]:
        """Restore a checkpoint written by :meth:`save_checkpoint` (or a checkpoint directory).

        Args:
            checkpoint_path: the file, or a checkpoint directory (its latest checkpoint),
                or a URL of either (``s3://...``; a file URL is downloaded every time).
            load_optimizer: also restore the optimizer, scheduler and GradScaler.
            load_training_state: also restore the loop counters, the run history, the
                callbacks' state, the data order and the random number generators (what
                resuming needs). ``False`` loads weights (and optimizer, if asked) into the
                current run and leaves its history and counters as they are.

        Returns the plain values stored with it (including ``checkpoint_kwargs``).
        """
        self._place_model()
        return resume.restore(
            self,
            checkpoint_path,
            include_optimizer=load_optimizer,
            include_training_state=load_training_state,
        )

    # ------------------------------------------------------------------ internals
    def _check_ready_loader(
        self, loader: object, name: str, kwargs: Mapping[str, Any] | None, collate: object
    ) -> None:
        if kwargs or collate is not None:
            raise ValueError(
                f"{name} is a {type(loader).__name__} that already yields batches, so "
                f"dataloader kwargs and collate_fn (received "
                f"{sorted(kwargs or {}) + (['collate_fn'] if collate else [])}) would "
                f"be ignored. Set them on your DataLoader, or pass the dataset itself."
            )
        check_ready_loader(loader, name)

    def _batch_loss(self, batch: Any, hook: str) -> dict[str, Any]:
        # (inputs, targets) with a tensor output: the common path, with no inspection.
        if (type(batch) is tuple or type(batch) is list) and len(batch) >= 2:
            inputs, targets = batch[0], batch[1]
            outputs = self.model(inputs)
        else:
            inputs, targets = split_batch(batch, hook)
            outputs = call_model(self.model, inputs)
        if isinstance(targets, torch.Tensor) and targets.ndim:
            size = int(targets.shape[0])
        else:
            check_batched_targets(targets, hook)
            size = batch_size_of(inputs, targets)
        if isinstance(outputs, torch.Tensor) and self.loss_func is not None and targets is not None:
            loss = tensor_loss(self.loss_func, outputs, targets, hook)
        else:
            loss = compute_loss(outputs, targets, self.loss_func, hook)
        return {"loss": loss, "model_outputs": outputs, "batch_size": size}

    def _prepare_model_for_training(self) -> None:
        self._place_model()
        if self.model is self._unwrapped_model:
            self.model = self.wrap_model(self._unwrapped_model)
            self._trainable_at_wrap = trainable(self._unwrapped_model)
            if self.model is not self._unwrapped_model:
                dist.register_wrapper_owner(self)  # released before the group is destroyed

    def _place_model(self) -> None:
        if isinstance(self.loss_func, nn.Module):  # CrossEntropyLoss(weight=...) follows it
            self.loss_func.to(self.device)  # (no copy for tensors already there)
        if _module_device(self._unwrapped_model) != self.device:
            self._unwrapped_model.to(self.device)
            # Optimizer state created before the move must follow the parameters.
            for st in self.optimizer.state.values():
                for k, v in st.items():
                    if isinstance(v, torch.Tensor) and k != "step":
                        st[k] = v.to(self.device)

    def _create_run_config(
        self, epochs: int, train_bs: int, eval_bs: int, max_steps: int | None, accum: int,
        clips: tuple[float | None, float | None],
    ) -> RunConfig:  # fmt: skip
        # The one builder of run settings (a compat Trainer adds its fields here).
        train_dl = self._train_dl if self.train_dataset is not None else None
        return plan_run(
            train_dl, self._eval_dl, epochs, train_bs, eval_bs, max_steps, accum, clips,
            self.precision, self.device,
        )  # fmt: skip

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        # The one autocast path; full precision skips even the call into runtime.precision.
        if self.precision == "no":
            return _NO_CONTEXT
        return autocast_context(self.precision, self.device.type)

    def _no_sync(self, skip_sync: bool) -> contextlib.AbstractContextManager[Any]:
        # Accumulation micro-steps need no gradient all-reduce: only the update does.
        if skip_sync and isinstance(self.model, nn.parallel.DistributedDataParallel):
            return self.model.no_sync()
        return _NO_CONTEXT


_NO_CONTEXT = contextlib.nullcontext()  # reusable: enters and exits without state


def _scale_gradients(optimizer: torch.optim.Optimizer, factor: float) -> None:
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    if grads and factor != 1:
        torch._foreach_mul_(grads, factor)


def _module_device(module: nn.Module) -> torch.device | None:
    for p in module.parameters():
        return p.device
    return None


Recovery = Callable[[nn.Module, Exception], contextlib.AbstractContextManager[Any]]


def _backward_recovery(model: nn.Module) -> Recovery | None:
    """The backward-failure recovery a module of ``model`` offers, if any."""
    for module in model.modules():
        recovery: Recovery | None = getattr(type(module), BACKWARD_RECOVERY, None)
        if recovery is not None:
            return recovery
    return None


__all__ = ["BACKWARD_RECOVERY", "DataSource", "EpochLosses", "Scheduler", "Trainer"]
