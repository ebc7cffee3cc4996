"""The Trainer: scramjet's one training loop, written as named, overridable hooks.

Read :meth:`Trainer.train` top to bottom: every step of the loop is a public method that
does one thing. Subclass and override a hook to change *how* a step is computed; add a
callback (see :mod:`scramjet.callbacks`) for infrastructure such as logging, progress,
checkpoints and stopping.
"""

from __future__ import annotations

import itertools
import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, Sampler

from scramjet.callbacks import DEFAULT_CALLBACKS
from scramjet.callbacks.base import CallbackHandler, Event, StopTrainingError, TrainerCallback
from scramjet.checkpoint.resume import TrainingStateMixin
from scramjet.runtime import distributed as dist
from scramjet.runtime import fsdp
from scramjet.runtime.devices import default_device, move_to_device
from scramjet.runtime.precision import autocast_context, make_grad_scaler, resolve_precision
from scramjet.runtime.seeding import seed_everything
from scramjet.schedulers import resolve_placeholders
from scramjet.trainer._eval_tmp import EvaluationMixin, _safe_len
from scramjet.trainer.checks import (
    check_loss,
    check_optimizer,
    check_train_args,
)
from scramjet.trainer.data_order import EpochSampler, ShardSampler, SkipSampler
from scramjet.trainer.state import RunConfig, RunHistory, TrainState


class Trainer(EvaluationMixin, TrainingStateMixin):
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

    # Declared here for the type checker: the mixins' methods use them.
    model: nn.Module
    optimizer: torch.optim.Optimizer
    device: torch.device
    precision: str
    scaler: Any
    state: TrainState
    run_history: RunHistory
    callback_handler: CallbackHandler
    eval_dataset: Any
    collate_fn: Callable[..., Any] | None
    _unwrapped_model: nn.Module
    _sharded: bool
    _end_epoch_requested: bool

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
        self.model = model
        self._sharded = fsdp.is_sharded(model)  # FSDP2: sharded in place before the Trainer
        self.loss_func = loss_func
        self.optimizer = optimizer
        self.precision = resolve_precision(precision)
        self.seed = seed
        if seed is not None:
            seed_everything(seed)
        dist.init_distributed()
        self.device = torch.device(device) if device is not None else default_device()
        self.run_history = run_history if run_history is not None else RunHistory()
        self.state = TrainState()
        self.scheduler: Any = None
        self.scaler = make_grad_scaler(self.precision, self.device.type)
        self.run_config: RunConfig | None = None
        self.stop_reason: StopTrainingError | None = None
        self._end_epoch_requested = False
        self.train_dataset: Any = None
        self.eval_dataset: Any = None
        self.collate_fn: Callable[..., Any] | None = None
        self._unwrapped_model = model
        self._sampler_seed: int | None = None
        chosen = DEFAULT_CALLBACKS if callbacks is None else callbacks
        self.callback_handler = CallbackHandler(chosen, custom_events=self.custom_events)
        self.callback_handler.call_event(Event.INIT_END, self)

    # ------------------------------------------------------------------ properties
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
    def in_training_run(self) -> bool:
        """True while ``train()`` runs (False in a standalone ``evaluate()``/``predict()``)."""
        return bool(getattr(self, "_in_training_run", False))

    @property
    def train_dataloader(self) -> Iterable[Any] | None:
        """The training loader of the current (or last) ``train()``; None before."""
        return getattr(self, "_train_dl", None)

    @property
    def eval_dataloader(self) -> Iterable[Any] | None:
        """The evaluation loader of ``train(eval_dataset=...)``; None without one."""
        return getattr(self, "_eval_dl", None)

    @property
    def current_dataloader(self) -> Iterable[Any] | None:
        """The loader being iterated now (training, evaluation or prediction); None between."""
        return getattr(self, "_current_dl", None)

    @property
    def batches_in_epoch(self) -> int:
        """Micro-batches in the current training epoch, resumed ones included; 0 if unknown."""
        return int(getattr(self, "_batches_in_epoch", 0))

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

        The sampler's order depends only on the run's seed and the epoch, which is what
        lets a run resume mid-epoch without replaying data; across processes each rank
        gets its own share (like ``DistributedSampler``), reshuffled every epoch.
        """
        kwargs = {**self.get_default_train_dl_kwargs(batch_size), **(train_dl_kwargs or {})}
        if self.collate_fn is not None:  # train(collate_fn=...) wins over the kwargs' one
            kwargs["collate_fn"] = self.collate_fn
        shuffle = kwargs.pop("shuffle")
        if isinstance(self.train_dataset, IterableDataset):
            # A generator of its own (reseeded every epoch): starting an epoch must not draw
            # from the global RNG, whose state a checkpoint restores.
            kwargs["generator"] = kwargs.get("generator") or torch.Generator()
            kwargs["generator"].manual_seed(self._ensure_sampler_seed() + dist.get_rank())
            return DataLoader(self.train_dataset, **kwargs)
        sampler: Sampler[int] | None = kwargs.pop("sampler", None)
        if sampler is None:
            sampler = EpochSampler(
                self.train_dataset,
                shuffle=shuffle,
                seed=self._ensure_sampler_seed(),
                num_replicas=dist.get_world_size(),
                rank=dist.get_rank(),
                drop_last=bool(kwargs.get("drop_last")),
            )
        elif not isinstance(sampler, EpochSampler | SkipSampler):
            sampler = SkipSampler(sampler)
        generator = kwargs.pop("generator", None) or torch.Generator()
        generator.manual_seed(self._ensure_sampler_seed() + dist.get_rank())
        return DataLoader(self.train_dataset, sampler=sampler, generator=generator, **kwargs)

    def create_eval_dataloader(
        self, batch_size: int, eval_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """Build the evaluation DataLoader: each rank takes ``r, r + W, ...``, no padding."""
        kwargs = {**self.get_default_eval_dl_kwargs(batch_size), **(eval_dl_kwargs or {})}
        kwargs.pop("shuffle", None)
        if self.collate_fn is not None:  # the collate_fn argument wins over the kwargs' one
            kwargs["collate_fn"] = self.collate_fn
        if isinstance(self.eval_dataset, IterableDataset):
            return DataLoader(self.eval_dataset, **kwargs)
        sampler = kwargs.pop("sampler", None) or ShardSampler(
            self.eval_dataset, dist.get_world_size(), dist.get_rank()
        )
        return DataLoader(self.eval_dataset, sampler=sampler, **kwargs)

    def create_scheduler(self) -> Any:
        """Build the scheduler from ``create_scheduler_fn`` with placeholders resolved."""
        assert self.run_config is not None
        rc = self.run_config
        values = {
            "num_epochs": rc.num_epochs,
            "num_update_steps_per_epoch": rc.num_update_steps_per_epoch,
            "total_update_steps": rc.total_update_steps,
            "per_process_batch_size": rc.train_per_device_batch_size,
            "eval_per_process_batch_size": rc.eval_per_device_batch_size,
            "gradient_accumulation_steps": rc.gradient_accumulation_steps,
            "num_processes": rc.num_processes,
            "train_dataloader_len": _safe_len(getattr(self, "_train_dl", None)),
            "eval_dataloader_len": _safe_len(getattr(self, "_eval_dl", None)),
        }
        if self._create_scheduler_fn is None:
            return None
        return resolve_placeholders(self._create_scheduler_fn, values)(self.optimizer)

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Wrap the model for training across processes (at ``train()``, if not wrapped yet).

        The default wraps it in ``DistributedDataParallel`` when more than one process
        runs, and leaves it as it is in one process or when it is sharded with FSDP
        (:func:`scramjet.runtime.shard_model` / ``fully_shard``), which needs no wrapper.
        Override to use another wrapper; :attr:`unwrapped_model` keeps the plain module.
        """
        if dist.get_world_size() == 1 or fsdp.is_sharded(model):
            return model
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)

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

    def evaluation_run_start(self) -> None:
        """Start of an evaluation run: hook for subclasses (the default does nothing)."""

    def evaluation_run_end(self) -> None:
        """End of an evaluation run: hook for subclasses (the default does nothing)."""

    def train_epoch_start(self) -> None:
        """Put the model in training mode and reset the epoch's loss tracking."""
        self.model.train()
        self._train_losses: tuple[list[torch.Tensor], list[int]] = ([], [])

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        """Forward pass and loss for one batch ``(inputs, targets)``.

        Returns:
            ``{"loss": scalar tensor (mean over the batch), "model_outputs": ...,
            "batch_size": int}``.
        """
        xb, yb = batch[0], batch[1]
        model_outputs = self.model(xb)
        loss = self.loss_func(model_outputs, yb)  # type: ignore[misc]
        return {"loss": loss, "model_outputs": model_outputs, "batch_size": yb.size(0)}

    def backward_step(self, loss: torch.Tensor) -> None:
        """Backpropagate ``loss``, scaled for accumulation and (fp16) loss scaling.

        With gradient accumulation each micro-batch's mean loss is divided by the number
        of micro-batches in its window — the last window of an epoch may be shorter — so
        an update averages its window's batches rather than summing them.
        """
        if self._loss_divisor != 1:
            loss = loss / self._loss_divisor
        if self.scaler is not None:
            loss = self.scaler.scale(loss)
        loss.backward()

    def clip_gradients(self) -> None:
        """Clip gradients once per optimizer update (value and/or norm), after unscaling."""
        rc = self.run_config
        assert rc is not None
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
        """Advance the scheduler once per optimizer update (if there is one)."""
        if self.scheduler is not None:
            self.scheduler.step()

    def optimizer_zero_grad(self) -> None:
        """Reset gradients after an update."""
        self.optimizer.zero_grad(set_to_none=True)

    def train_epoch_end(self) -> None:
        """Record ``train_loss_epoch``: the mean loss per sample, over all processes."""
        self.run_history.update_metric(
            "train_loss_epoch", self._epoch_mean_loss(self._train_losses)
        )

    def eval_epoch_start(self) -> None:
        """Put the model in evaluation mode and reset the epoch's loss tracking."""
        self.model.eval()
        self._eval_losses: tuple[list[torch.Tensor], list[int]] = ([], [])

    def calculate_eval_batch_loss(self, batch: Any) -> dict[str, Any]:
        """Forward pass and loss for one evaluation batch (run under ``torch.no_grad``)."""
        xb, yb = batch[0], batch[1]
        model_outputs = self.model(xb)
        loss = self.loss_func(model_outputs, yb)  # type: ignore[misc]
        return {"loss": loss, "model_outputs": model_outputs, "batch_size": yb.size(0)}

    def eval_epoch_end(self) -> None:
        """Record ``eval_loss_epoch``: the mean loss per sample, over all processes."""
        self.run_history.update_metric("eval_loss_epoch", self._epoch_mean_loss(self._eval_losses))

    def predict_step(self, batch: Any) -> Any:
        """Model outputs for one batch; inputs are ``batch[0]`` for tuples/lists."""
        inputs = batch[0] if isinstance(batch, list | tuple) else batch
        return self.model(inputs)

    # ------------------------------------------------------------------ orchestration
    def train(
        self,
        train_dataset: Any,
        num_epochs: int,
        eval_dataset: Any = None,
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
        both bound the run.

        ``resume_from`` takes a checkpoint file, or a directory of checkpoints whose
        latest good one is used, and continues at the exact optimizer step it was saved
        at (mid-epoch included), restoring model, optimizer, scheduler, scaler, counters,
        history, callback state and RNG states.
        """
        check_train_args(
            train_dataset, eval_dataset, num_epochs, per_device_batch_size,
            eval_per_device_batch_size, max_num_train_steps, gradient_accumulation_steps,
            gradient_clip_value, gradient_clip_norm,
        )  # fmt: skip
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.collate_fn = collate_fn
        self._create_scheduler_fn = create_scheduler_fn
        if reset_run_history:
            self.run_history.reset()
        self.state = TrainState()
        self.stop_reason = None
        self._sampler_seed = None
        self._resumed_losses: tuple[list[torch.Tensor], list[int]] | None = None
        self._prepare_model_for_training()
        self._train_dl = self.create_train_dataloader(
            per_device_batch_size, train_dataloader_kwargs
        )
        eval_bs = eval_per_device_batch_size or per_device_batch_size
        self._eval_dl = None
        if eval_dataset is not None:
            self._eval_dl = self.create_eval_dataloader(eval_bs, eval_dataloader_kwargs)
        self.run_config = self._create_run_config(
            num_epochs, per_device_batch_size, eval_bs, max_num_train_steps,
            gradient_accumulation_steps, gradient_clip_value, gradient_clip_norm,
        )  # fmt: skip
        self.scheduler = self.create_scheduler() if create_scheduler_fn is not None else None
        if resume_from is not None:
            self._restore_training_state(resume_from)
        self._run_training()

    def _run_training(self) -> None:
        rc = self.run_config
        assert rc is not None
        # Drop gradients left over from before the run; not the hook, so hooks run exactly
        # in the documented order (optimizer_zero_grad only after an update).
        self.optimizer.zero_grad(set_to_none=True)
        self._in_training_run = True
        self.training_run_start()
        self.callback_handler.call_event(Event.TRAINING_RUN_START, self)
        try:
            while self.state.epoch < rc.num_epochs and not self._reached_max_steps():
                self._epoch_finished = False
                self._run_train_epoch(self._train_dl)
                if self._eval_dl is not None:
                    self._run_evaluation(self._eval_dl)
                self._epoch_finished = True
                self.callback_handler.call_event(Event.TRAINING_RUN_EPOCH_END, self)
                self._epoch_finished = False
                self.state.epoch += 1
                self.state.batches_seen_in_epoch = 0
                self.run_history._increment_epoch()
                if self.state.stop_requested:
                    break
        except StopTrainingError as err:
            self.stop_reason = err
            self.callback_handler.call_event(Event.STOP_TRAINING_ERROR, self, error=err)
        except BaseException:  # a crash: let callbacks release threads and displays, re-raise
            self._in_training_run = False
            self.callback_handler.close_all(self)
            raise
        self.training_run_end()
        self.callback_handler.call_event(Event.TRAINING_RUN_END, self)
        self._in_training_run = False
        if self.stop_reason is not None and getattr(self.stop_reason, "reraise", False):
            raise self.stop_reason

    def _epoch_batches(self, train_dl: Iterable[Any]) -> tuple[Iterable[Any], int]:
        """This epoch's batches (after any resume point) and the epoch's length (0: unknown)."""
        rc, state = self.run_config, self.state
        assert rc is not None
        sampler: Any = getattr(train_dl, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(state.epoch)
        dataset: Any = self.train_dataset
        if callable(getattr(dataset, "set_epoch", None)):  # e.g. seeded augmentations
            dataset.set_epoch(state.epoch)  # of a PackedDataset: new draws every epoch
        if hasattr(sampler, "set_start"):
            sampler.set_start(state.batches_seen_in_epoch * rc.train_per_device_batch_size)
        self._reseed_loader(train_dl)
        n_batches = _safe_len(train_dl)  # 0 when the loader has no length (IterableDataset)
        batches: Iterable[Any] = train_dl
        if hasattr(sampler, "set_start"):  # the loader holds only the batches still to come
            n_batches = state.batches_seen_in_epoch + n_batches if n_batches else 0
        elif state.batches_seen_in_epoch:
            # Nothing to skip indices with (e.g. an IterableDataset): read past the batches
            # consumed before the resume without running them, so none is trained twice.
            batches = itertools.islice(train_dl, state.batches_seen_in_epoch, None)
        return batches, n_batches

    def _run_train_epoch(self, train_dl: Iterable[Any]) -> None:
        rc = self.run_config
        assert rc is not None
        state, handler, accum = self.state, self.callback_handler, rc.gradient_accumulation_steps
        batches, n_batches = self._epoch_batches(train_dl)
        self._batches_in_epoch, self._current_dl = n_batches, train_dl
        self.train_epoch_start()
        if self._resumed_losses is not None:  # losses of the epoch's batches before the resume
            self._train_losses, self._resumed_losses = self._resumed_losses, None
        handler.call_event(Event.TRAIN_EPOCH_START, self)
        has_step_start = handler.has(Event.TRAIN_STEP_START)
        has_step_end = handler.has(Event.TRAIN_STEP_END)
        on_device = self.device.type != "cpu"
        autocast = self.precision != "no"
        open_window = False
        for batch in batches:
            i = state.batches_seen_in_epoch
            window_start = i - i % accum
            window_end = min(window_start + accum, n_batches) if n_batches else window_start + accum
            self._loss_divisor = window_end - window_start
            is_update = i + 1 == window_end
            if on_device:
                batch = move_to_device(batch, self.device, non_blocking=True)
            if has_step_start:
                handler.call_event(Event.TRAIN_STEP_START, self)
            with self._no_sync(not is_update):
                if autocast:
                    with autocast_context(self.precision, self.device.type):
                        batch_output = self.calculate_train_batch_loss(batch)
                else:
                    batch_output = self.calculate_train_batch_loss(batch)
                if i == 0 or state.global_step == 0:
                    check_loss(batch_output)
                self._record_loss(self._train_losses, batch_output)
                if has_step_end:
                    handler.call_event(
                        Event.TRAIN_STEP_END, self, batch=batch, batch_output=batch_output
                    )
                if self._sharded:  # FSDP reduces inside the backward: the last micro-step of
                    # a window syncs, and so does every one when the window's end is unknown
                    fsdp.set_gradient_sync(
                        self._unwrapped_model,
                        is_update or self._end_epoch_requested or not n_batches,
                    )
                try:
                    self.backward_step(batch_output["loss"])
                except Exception as error:  # an accelerated backend may fail in backward
                    batch_output = self._redo_step(error, batch, first=i == window_start)
            state.batches_seen_in_epoch = i + 1
            state.samples_seen += batch_output["batch_size"]
            open_window = not is_update
            if is_update:
                self._apply_update()
                if self._reached_max_steps() or state.stop_requested:
                    break
            if self._end_epoch_requested:
                break
        if open_window:  # ended inside an accumulation window: end_epoch(), or unknown length
            self._close_window(held=(state.batches_seen_in_epoch - 1) % accum + 1)
        self._end_epoch_requested = False
        self._current_dl = None
        self.train_epoch_end()
        handler.call_event(Event.TRAIN_EPOCH_END, self)

    # ------------------------------------------------------------------ internals
    def _prepare_model_for_training(self) -> None:
        self._place_model()
        if self.model is self._unwrapped_model:
            self.model = self.wrap_model(self._unwrapped_model)
            if self.model is not self._unwrapped_model:
                dist.register_wrapper_owner(self)  # released before the group is destroyed

    def _place_model(self) -> None:
        if _module_device(self._unwrapped_model) != self.device:
            self._unwrapped_model.to(self.device)
            # Optimizer state created before the move must follow the parameters.
            for st in self.optimizer.state.values():
                for k, v in st.items():
                    if isinstance(v, torch.Tensor) and k != "step":
                        st[k] = v.to(self.device)

    def _create_run_config(
        self,
        num_epochs: int,
        train_bs: int,
        eval_bs: int,
        max_steps: int | None,
        accum: int,
        clip_value: float | None,
        clip_norm: float | None,
    ) -> RunConfig:
        n_batches = (
            _safe_len(getattr(self, "_train_dl", None)) if self.train_dataset is not None else 0
        )
        updates_per_epoch = math.ceil(n_batches / accum) if n_batches else 0
        if max_steps and updates_per_epoch:
            # As in pytorch-accelerated, a step budget sets the run's length: enough epochs
            # to make max_steps updates (the last one stops early). Without a length, the
            # dataset's end still ends an epoch and num_epochs still bounds the run.
            num_epochs = math.ceil(max_steps / updates_per_epoch)
        return RunConfig(
            num_epochs=num_epochs,
            train_per_device_batch_size=train_bs,
            eval_per_device_batch_size=eval_bs,
            num_update_steps_per_epoch=updates_per_epoch,
            max_num_train_steps=max_steps,
            gradient_accumulation_steps=accum,
            gradient_clip_value=clip_value,
            gradient_clip_norm=clip_norm,
            precision=self.precision,
            num_processes=dist.get_world_size(),
            is_local_process_zero=int(os.environ.get("LOCAL_RANK", "0")) == 0,
            is_world_process_zero=dist.is_main_process(),
            device=str(self.device),
        )

    def _ensure_sampler_seed(self) -> int:
        if self._sampler_seed is None:
            if self.seed is not None:
                self._sampler_seed = int(self.seed)
            else:  # drawn from torch's RNG, so torch.manual_seed(...) makes it reproducible
                drawn = int(torch.randint(0, 2**31 - 1, ()).item())
                self._sampler_seed = int(dist.gather_object(drawn)[0])  # rank 0's draw
        return self._sampler_seed

    def _reseed_loader(self, dl: Any) -> None:
        # Worker seeds follow (seed, epoch, rank): reproducible, and different every epoch.
        gen = getattr(dl, "generator", None)
        if isinstance(gen, torch.Generator) and self._sampler_seed is not None:
            gen.manual_seed(self._sampler_seed + 1_000_003 * self.state.epoch + dist.get_rank())

    def _no_sync(self, skip_sync: bool) -> Any:
        # Accumulation micro-steps need no gradient all-reduce: only the update does.
        if skip_sync and isinstance(self.model, nn.parallel.DistributedDataParallel):
            return self.model.no_sync()
        return _NULL_CONTEXT

    def _redo_step(self, error: Exception, batch: Any, *, first: bool) -> dict[str, Any]:
        """Redo a micro-step whose backward failed in an accelerated backend (else re-raise).

        :func:`scramjet.accel.recover_backward` undoes the failed forward's side effects;
        the gradients are cleared (the failed backward may have written part of them), so
        earlier micro-batches of an accumulation window are left out of this one update.
        In a distributed run the error is raised: the other ranks are already waiting in
        this step's gradient all-reduce, so one rank cannot redo it alone.
        """
        from scramjet.accel.model import recover_backward

        if dist.get_world_size() > 1:  # the other ranks wait in this step's all-reduce
            raise error
        with recover_backward(self._unwrapped_model, error):
            self.optimizer.zero_grad(set_to_none=True)
            if not first:
                warnings.warn(
                    "An accelerated backend failed in backward in the middle of a gradient "
                    "accumulation window; the window's earlier micro-batches are left out of "
                    "this update.",
                    RuntimeWarning,
                    stacklevel=3,
                )
            with autocast_context(self.precision, self.device.type):
                batch_output = self.calculate_train_batch_loss(batch)
            self._train_losses[0][-1] = batch_output["loss"].detach()  # replaces the failed one
            self.backward_step(batch_output["loss"])
        return batch_output

    @staticmethod
    def _record_loss(
        acc: tuple[list[torch.Tensor], list[int]], batch_output: Mapping[str, Any]
    ) -> None:
        # Kept as tensors: no device sync per step; reduced once at the end of the epoch.
        acc[0].append(batch_output["loss"].detach())
        acc[1].append(int(batch_output["batch_size"]))

    def _epoch_mean_loss(self, acc: tuple[list[torch.Tensor], list[int]]) -> float:
        """Per-sample mean of an epoch's batch losses, over all processes."""
        terms, counts_list = acc
        if terms:
            losses = torch.stack([t.float() for t in terms])
            counts = torch.tensor(counts_list, dtype=torch.float32, device=losses.device)
            totals = torch.stack([(losses * counts).sum(), counts.sum()])
        else:
            totals = torch.zeros(2, device=self.device)
        totals = dist.reduce(totals.to(self.device), op="sum")
        return float(totals[0] / totals[1]) if float(totals[1]) > 0 else math.nan

    def _close_window(self, held: int) -> None:
        # The window's batches were divided by its full size; rescale so the update
        # averages the ``held`` batches it really has, then apply it.
        _scale_gradients(self.optimizer, self._loss_divisor / held)
        if isinstance(self.model, nn.parallel.DistributedDataParallel):  # it ran under no_sync
            for p in self.model.parameters():
                if p.grad is not None:
                    p.grad = dist.reduce(p.grad, op="mean")
        self._apply_update()

    def _apply_update(self) -> None:
        self.clip_gradients()
        self.optimizer_step()
        self.scheduler_step()
        self.optimizer_zero_grad()
        self.state.global_step += 1
        self.callback_handler.call_event(Event.OPTIMIZER_STEP_END, self)

    def end_epoch(self) -> None:
        """Ask the loop to end the current train or eval epoch after the current batch.

        In training, an unfinished accumulation window is applied as an update first.
        """
        self._end_epoch_requested = True

    def stop_training(self) -> None:
        """Ask the loop to stop after the current optimizer update (no error raised)."""
        self.state.stop_requested = True

    def _reached_max_steps(self) -> bool:
        rc = self.run_config
        return bool(
            rc and rc.max_num_train_steps and self.state.global_step >= rc.max_num_train_steps
        )


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NULL_CONTEXT = _NullContext()


def _scale_gradients(optimizer: torch.optim.Optimizer, factor: float) -> None:
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    if grads and factor != 1:
        torch._foreach_mul_(grads, factor)


def _module_device(module: nn.Module) -> torch.device | None:
    for p in module.parameters():
        return p.device
    return None


__all__ = ["Trainer"]
