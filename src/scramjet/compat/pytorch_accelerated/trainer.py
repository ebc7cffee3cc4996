"""pytorch-accelerated's ``Trainer`` as a thin subclass of :class:`scramjet.Trainer`.

The training loop, hooks and events are scramjet's. This class adds the peer's names:
``get_model``, ``gather``, ``save_checkpoint(save_scheduler=, save_per_node=)`` writing
the peer's top-level keys, ``load_checkpoint(load_scheduler=)``, ``save_training_state``
/ ``load_training_state`` (a checkpoint directory), a ``TrainerRunConfig`` as
``run_config``, the ``LimitBatches`` block, and the peer's ``CallbackHandler`` methods.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from scramjet.callbacks.base import Event, TrainerCallback
from scramjet.callbacks.control import LimitBatchesCallback
from scramjet.checkpoint import CheckpointManager
from scramjet.checkpoint.payload import unwrap
from scramjet.checkpoint.records import load_training_object
from scramjet.compat.pytorch_accelerated import _files
from scramjet.compat.pytorch_accelerated._accelerator import AcceleratorView
from scramjet.compat.pytorch_accelerated.callbacks import DEFAULT_CALLBACKS, CallbackHandler
from scramjet.compat.pytorch_accelerated.run_config import TrainerRunConfig
from scramjet.compat.pytorch_accelerated.tracking import RunHistory
from scramjet.compat.pytorch_accelerated.utils import active_batch_limit
from scramjet.runtime import distributed as dist
from scramjet.runtime import fsdp
from scramjet.schedulers import TrainerPlaceholderValues as CorePlaceholderValues
from scramjet.schedulers import _Placeholder, resolve_placeholders
from scramjet.trainer import RunHistory as CoreRunHistory
from scramjet.trainer import Trainer as CoreTrainer
from scramjet.trainer.data_order import safe_len


class _NamedPlaceholder(_Placeholder):
    """A placeholder under a peer's name for a value scramjet knows under another key."""

    def __init__(self, key: str, name: str) -> None:
        super().__init__(key)
        self.name = name

    def __repr__(self) -> str:
        return f"TrainerPlaceholderValues.{self.name}"


class TrainerPlaceholderValues(CorePlaceholderValues):
    """scramjet's placeholders, with the peer's ``PER_PROCESS_NUM_UPDATE_STEPS_PER_EPOCH``
    and ``placeholder_set()``.

    ``NUM_UPDATE_STEPS_PER_EPOCH`` already counts one process's updates here (see
    docs/compat.md), so both names stand for the same number.
    """

    PER_PROCESS_NUM_UPDATE_STEPS_PER_EPOCH = _NamedPlaceholder(
        "num_update_steps_per_epoch", "PER_PROCESS_NUM_UPDATE_STEPS_PER_EPOCH"
    )

    @classmethod
    def placeholder_set(cls) -> set[str]:
        """The names of every placeholder."""
        return {name for name in dir(cls) if name.isupper()}


class _AdvanceEpoch(TrainerCallback):
    """Advances a run history of the user's own (the RunHistory ABC) after each epoch."""

    def on_training_run_epoch_end(self, trainer: CoreTrainer, **kwargs: Any) -> None:
        trainer.run_history._increment_epoch()


class Trainer(CoreTrainer):
    """scramjet's Trainer with pytorch-accelerated's names (see the module docstring).

    Args:
        model: the ``nn.Module`` to train.
        loss_func: called as ``loss_func(model_outputs, targets)``.
        optimizer: a ``torch.optim.Optimizer`` over the model's parameters.
        callbacks: callback instances or classes (``DEFAULT_CALLBACKS`` by default).
        run_history: an ``InMemoryRunHistory`` (the default), or your own ``RunHistory``.
        **kwargs: scramjet's extra settings (``precision``, ``seed``, ``device``).
    """

    def __init__(
        self,
        model: nn.Module,
        loss_func: Callable[..., torch.Tensor] | None,
        optimizer: torch.optim.Optimizer | None,
        callbacks: Iterable[TrainerCallback | type[TrainerCallback]] | None = DEFAULT_CALLBACKS,
        run_history: CoreRunHistory | RunHistory | None = None,
        **kwargs: Any,
    ) -> None:
        own_history = run_history is not None and not isinstance(run_history, CoreRunHistory)
        if run_history is not None and not isinstance(run_history, CoreRunHistory | RunHistory):
            raise TypeError(
                f"run_history must be an InMemoryRunHistory or a subclass of "
                f"scramjet.compat.pytorch_accelerated.tracking.RunHistory; received "
                f"{type(run_history).__name__}."
            )
        # optimizer=None: a Trainer that only evaluates and predicts, as the peer allows. The
        # core Trainer holds a learning-rate-0 stand-in; train() and loading an optimizer
        # state are refused, and checkpoints carry no optimizer.
        self.has_optimizer = optimizer is not None
        if optimizer is None and isinstance(model, nn.Module):
            params: list[torch.Tensor] = list(model.parameters())
            params = params or [torch.zeros((), requires_grad=True)]
            optimizer = torch.optim.SGD(params, lr=0.0)
        super().__init__(
            model, loss_func, optimizer, (), cast(CoreRunHistory, run_history), **kwargs
        )
        chosen: list[TrainerCallback | type[TrainerCallback]] = list(
            DEFAULT_CALLBACKS if callbacks is None else callbacks
        )
        limit = active_batch_limit()
        if limit is not None:
            chosen.insert(0, LimitBatchesCallback(limit))
        if own_history:
            chosen.append(_AdvanceEpoch())
        self.callback_handler = CallbackHandler(chosen, custom_events=self.custom_events)
        self.callback_handler.call_event(Event.INIT_END, self)
        self._dl_kwargs: dict[str, dict[str, Any]] = {"train": {}, "eval": {}}

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """Train as the core Trainer does; refused on a Trainer built with optimizer=None."""
        if not self.has_optimizer:
            raise TypeError(
                "train() needs an optimizer, and this Trainer was built with optimizer=None "
                "(evaluation and prediction only). Build it with e.g. "
                "optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3)."
            )
        return super().train(*args, **kwargs)

    # ------------------------------------------------------------------ peer attributes
    @property
    def _accelerator(self) -> AcceleratorView:
        """What code written for the peer reads from its ``accelerate.Accelerator``."""
        return AcceleratorView(self)

    @property
    def _train_dataloader(self) -> Iterable[Any] | None:
        """The peer's name for :attr:`train_dataloader` (read-only)."""
        return self.train_dataloader

    @property
    def _eval_dataloader(self) -> Iterable[Any] | None:
        """The peer's evaluation loader (read-only): the last standalone ``evaluate()``'s
        (set before its first event, as the peer does) until the next ``train()``, else
        :attr:`eval_dataloader`."""
        return self._evaluate_dl if self._evaluate_dl is not None else self.eval_dataloader

    @property
    def create_scheduler_fn(self) -> Callable[..., Any] | None:
        """The ``create_scheduler_fn`` given to the current (or last) ``train()``.

        An override of :meth:`create_scheduler` may build from it, as in the peer:
        ``replace_trainer_placeholder_values(self, self.create_scheduler_fn)(self.optimizer)``.
        """
        return self._create_scheduler_fn

    @create_scheduler_fn.setter
    def create_scheduler_fn(self, value: Callable[..., Any] | None) -> None:
        self._create_scheduler_fn = value

    # ------------------------------------------------------------------ distributed wrapper
    # ------------------------------------------------------------------ peer hooks
    def train_epoch_end(self) -> None:
        """End of a training epoch: a hook for subclasses (the default does nothing).

        As in pytorch-accelerated, the loop records ``train_loss_epoch`` after this hook
        and before ``on_train_epoch_end``, so an override need not call ``super()``.
        """

    def eval_epoch_end(self) -> None:
        """End of an evaluation epoch: a hook for subclasses (the default does nothing).

        As in pytorch-accelerated, the loop records ``eval_loss_epoch`` after this hook
        and before ``on_eval_epoch_end``, so an override need not call ``super()``.
        """

    def clip_gradients(self) -> None:
        """Clip once per optimizer update (see :meth:`scramjet.Trainer.clip_gradients`).

        A subclass that overrides the peer's ``_clip_gradients`` (to clip by norm, say)
        has its override called instead whenever ``gradient_clip_value`` is set, as the
        peer calls it.
        """
        if (
            type(self)._clip_gradients is not Trainer._clip_gradients
            and self.run_config.gradient_clip_value is not None
        ):
            self._clip_gradients()
        else:
            super().clip_gradients()

    def _clip_gradients(self) -> None:
        """The peer's clipping hook: clip to ``[-gradient_clip_value, gradient_clip_value]``."""
        super().clip_gradients()

    def _record_epoch_loss(self, metric: str) -> None:
        # Called by the compat CallbackHandler just before the epoch-end event: the mean
        # loss per sample of the epoch, over all processes (a collective: every rank calls).
        # A standalone evaluate() also records it under the peer's name, evaluation_loss.
        losses = self.train_losses if metric == "train_loss_epoch" else self.eval_losses
        value = losses.mean(self.device)
        self.run_history.update_metric(metric, value)
        if metric == "eval_loss_epoch" and not self.in_training_run:
            self.run_history.update_metric("evaluation_loss", value)

    def _intermediate_evaluation(self) -> bool:
        # The peer's is_intermediate: an evaluation inside a training run that is not the
        # epoch's own (a step-based one).
        return self.in_training_run and not self._epoch_eval

    # ------------------------------------------------------------------ peer names
    def get_model(self, keep_torch_compile: bool = True) -> nn.Module:
        """The model without its distributed wrapper (and without ``torch.compile``'s if asked)."""
        model = self.unwrapped_model
        if keep_torch_compile:
            return model
        unwrapped: nn.Module = unwrap(model)
        return unwrapped

    def gather(self, tensor: torch.Tensor, padding_value: Any = None) -> torch.Tensor:
        """``tensor`` from every process, concatenated along dim 0 in rank order.

        Ranks may hold different numbers of rows: each rank's rows are gathered as they
        are, so no padding rows are added (``padding_value`` is accepted and not needed).
        """
        return dist.gather(tensor)

    def save_checkpoint(
        self,
        save_path: str | os.PathLike[str],
        checkpoint_kwargs: dict[str, Any] | None = None,
        save_optimizer: bool = True,
        save_per_node: bool = True,
        save_scheduler: bool = True,
    ) -> None:
        """Write a checkpoint with the peer's top-level keys (all processes call it).

        The file holds ``model_state_dict``, ``optimizer_state_dict`` (``save_optimizer``),
        ``scheduler_state_dict`` (``save_scheduler``, when there is a scheduler) and each
        ``checkpoint_kwargs`` entry; it is also a complete scramjet checkpoint, so
        ``train(resume_from=save_path)`` resumes from it exactly. The first process of
        each machine writes (``save_per_node``), or only the main process; with a model
        sharded by FSDP, only the main process, which alone holds the full state dicts.
        """
        state = self.training_state(include_optimizer=save_optimizer and self.has_optimizer)
        if not save_scheduler:
            state.pop("scheduler", None)
        # FSDP gathers the full state dicts on the main process only: it alone writes.
        per_node = save_per_node and not fsdp.is_sharded(unwrap(self.unwrapped_model))
        if save_per_node and not per_node and _nodes() > 1 and dist.get_local_rank() == 0:
            warnings.warn(
                "save_checkpoint(save_per_node=True) with a model sharded by FSDP: the full "
                "state dicts are gathered on the main process only, so only the main "
                "process (on node 0) writes the file. Keep the checkpoint folder on a file "
                "system every node shares (load_checkpoint reads the file on every "
                "process), or pass save_per_node=False to say so.",
                stacklevel=2,
            )
        writer = dist.get_local_rank() == 0 if per_node else self.is_main_process
        if writer:
            _files.write_file(
                save_path, state, checkpoint_kwargs or {},
                step=self.state.global_step, epoch=self.state.epoch,
            )  # fmt: skip
        dist.barrier()

    def load_checkpoint(
        self,
        checkpoint_path: str | os.PathLike[str],
        load_optimizer: bool = True,
        load_scheduler: bool = True,
        *,
        load_training_state: bool = False,
    ) -> dict[str, Any]:
        """Load weights (and optimizer, scheduler) from a checkpoint file; returns its contents.

        Reads files written by :meth:`save_checkpoint` and by pytorch-accelerated itself
        (``weights_only=True`` either way). ``load_training_state=True`` also restores
        the counters, history, callbacks, data order and RNG states, as resuming does
        (scramjet checkpoints only).
        """
        if load_optimizer and not self.has_optimizer:
            raise ValueError(
                "load_checkpoint(load_optimizer=True): this Trainer was built with "
                "optimizer=None, so there is no optimizer to load the state into. Pass "
                "load_optimizer=False to load the weights only."
            )
        if load_training_state:
            values = super().load_checkpoint(checkpoint_path, load_optimizer)
            view, _ = _files.read_file(checkpoint_path)
            return {**values, **view}
        view, classes = _files.read_file(checkpoint_path)
        model, path = unwrap(self.unwrapped_model), Path(checkpoint_path)
        sharded = fsdp.is_sharded(model)  # FSDP: full state dicts into the shards
        if sharded:
            fsdp.load_full_model_state(model, view["model_state_dict"])
        else:
            model.load_state_dict(view["model_state_dict"])
        # Each state is checked against what it is loaded into first (an optimizer with
        # other parameter groups, another kind of optimizer or scheduler): the error names
        # both and the fix, where torch's only said "different number of parameter groups".
        for key, obj, wanted in (
            ("optimizer_state_dict", self.optimizer, load_optimizer),
            ("scheduler_state_dict", self.scheduler, load_scheduler),
            ("scaler_state_dict", self.scaler, load_optimizer),
        ):
            if not (wanted and obj is not None and key in view):
                continue
            kind = classes.get(key)
            if sharded and obj is self.optimizer:
                load_training_object(
                    key, obj, view[key], True, path, check_only=True, saved_class=kind
                )
                fsdp.load_full_optimizer_state(model, obj, view[key])
            else:
                load_training_object(key, obj, view[key], True, path, saved_class=kind)
        return view

    def save_training_state(
        self, save_dir: str | os.PathLike[str], checkpoint_kwargs: dict[str, Any] | None = None
    ) -> None:
        """Save everything needed to resume into the directory ``save_dir`` (all processes call).

        ``train(resume_from=save_dir)`` or :meth:`load_training_state` continue from it at
        the exact optimizer step. ``checkpoint_kwargs`` are stored with it.
        """
        state = {**self.training_state(), **(checkpoint_kwargs or {})}
        if self.is_main_process:
            with CheckpointManager(save_dir, keep_last=1, async_write=False) as manager:
                epoch = self.state.epoch + (1 if self.state.epoch_finished else 0)
                manager.save(state, step=self.state.global_step, epoch=epoch)
        dist.barrier()

    def load_training_state(self, save_dir: str | os.PathLike[str]) -> dict[str, Any]:
        """Restore what :meth:`save_training_state` saved; returns its stored values.

        The values include ``checkpoint_kwargs`` and ``current_epoch``.
        """
        values = super().load_checkpoint(save_dir, load_optimizer=True)
        values.setdefault("current_epoch", self.run_history.current_epoch)
        return values

    # ------------------------------------------------------------------ run settings
    def create_train_dataloader(
        self, batch_size: int, train_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """scramjet's training loader; the kwargs in use go to ``run_config.train_dl_kwargs``."""
        defaults = self.get_default_train_dl_kwargs(batch_size)
        self._dl_kwargs["train"] = {**defaults, **(train_dl_kwargs or {})}
        return super().create_train_dataloader(batch_size, train_dl_kwargs)

    def create_eval_dataloader(
        self, batch_size: int, eval_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """scramjet's evaluation loader; the kwargs in use go to ``run_config.eval_dl_kwargs``."""
        defaults = self.get_default_eval_dl_kwargs(batch_size)
        self._dl_kwargs["eval"] = {**defaults, **(eval_dl_kwargs or {})}
        loader = super().create_eval_dataloader(batch_size, eval_dl_kwargs)
        config = self._run_config
        if isinstance(config, TrainerRunConfig) and not self._in_training_run:
            # A standalone evaluate() set its batch size before its loader was made: the
            # peer's fields follow it (a train() builds its settings after its loaders).
            self._run_config = dataclasses.replace(
                config, eval_dl_kwargs=self._dl_kwargs["eval"],
                eval_total_batch_size=config.eval_per_device_batch_size * config.num_processes,
            )  # fmt: skip
        return loader

    def _create_run_config(self, *args: Any, **kwargs: Any) -> TrainerRunConfig:
        # The core's settings, with the peer's extra fields (a RunConfig subclass).
        core = super()._create_run_config(*args, **kwargs)
        procs, accum = core.num_processes, core.gradient_accumulation_steps
        return TrainerRunConfig(
            **dataclasses.asdict(core),
            train_dl_kwargs=self._dl_kwargs["train"],
            eval_dl_kwargs=self._dl_kwargs["eval"],
            train_total_batch_size=core.train_per_device_batch_size * procs * accum,
            eval_total_batch_size=core.eval_per_device_batch_size * procs,
            num_local_update_steps_per_epoch=core.num_update_steps_per_epoch,
            is_distributed=procs > 1,
            mixed_precision=core.precision,
        )


class TrainerWithTimmScheduler(Trainer):
    """A Trainer for timm schedulers, stepped as pytorch-accelerated 0.1.61 steps them.

    - ``num_updates`` (None before the first epoch) starts each training epoch at
      ``run_history.current_epoch * len(train_dataloader)``; ``current_epoch`` is 1-based,
      so the first epoch starts at ``len(train_dataloader)``, as in the peer. A run
      resumed in the middle of an epoch adds the updates already made in that epoch.
    - After every optimizer update, :meth:`scheduler_step` adds 1 to ``num_updates`` and
      calls ``scheduler.step_update(num_updates=self.num_updates)``.
    - :meth:`eval_epoch_end` calls ``scheduler.step(run_history.current_epoch + 1)``
      (``eval_loss_epoch`` is recorded after it, as in the peer): the epoch-level step happens only
      when ``train()`` has an ``eval_dataset``. It runs once per training epoch, after the
      epoch: a standalone :meth:`evaluate` or a ``run_evaluation()`` in the middle of an
      epoch does not step the scheduler.

    A scheduler that moves per epoch (timm's ``t_in_epochs=True``) never changes the
    learning rate without an ``eval_dataset``: ``train()`` warns when that is the case.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.num_updates: int | None = None
        self._epoch_step_due = False

    def create_scheduler(self) -> Any:
        """Build the scheduler; warn if it moves per epoch but no epoch step will come."""
        scheduler = super().create_scheduler()
        if (
            scheduler is not None
            and self.eval_dataset is None
            and getattr(scheduler, "t_in_epochs", False)
        ):
            warnings.warn(
                "TrainerWithTimmScheduler calls scheduler.step(epoch) after each evaluation "
                "epoch, as pytorch-accelerated does, and train() has no eval_dataset: this "
                "scheduler (t_in_epochs=True) will keep its first learning rate. Pass an "
                "eval_dataset, or create the scheduler with t_in_epochs=False so that "
                "step_update(num_updates) moves it.",
                UserWarning,
                stacklevel=3,
            )
        return scheduler

    def train_epoch_start(self) -> None:
        """Put the model in training mode; set ``num_updates`` to this epoch's start."""
        super().train_epoch_start()
        # The epoch's whole length: after a resume in the middle of an epoch the loader
        # only holds the batches left, and batches_in_epoch counts the skipped ones too.
        batches = self.batches_in_epoch or safe_len(self.train_dataloader)
        if not batches:
            if self.scheduler is not None:
                raise TypeError(
                    "TrainerWithTimmScheduler counts num_updates from len(train_dataloader), "
                    "and this training loader has no length: give train() a dataset with "
                    "__len__, or override train_epoch_start to set trainer.num_updates."
                )
            return
        done = self.state.batches_seen_in_epoch // self.run_config.gradient_accumulation_steps
        self.num_updates = self.run_history.current_epoch * batches + done

    def scheduler_step(self) -> None:
        """Add 1 to ``num_updates`` and call ``scheduler.step_update(num_updates=...)``."""
        if self.num_updates is None:  # an override of train_epoch_start did not set it
            self.num_updates = self.state.global_step
        self.num_updates += 1
        scheduler: Any = self.scheduler
        if scheduler is not None:
            scheduler.step_update(num_updates=self.num_updates)

    def _run_train_epoch(self, *args: Any, **kwargs: Any) -> None:
        # The evaluation that follows a whole training epoch steps the scheduler's epoch;
        # one run in the middle of it (run_evaluation) does not. Noted here rather than in
        # train_epoch_end, which an override need not pass on to.
        self._epoch_step_due = False
        super()._run_train_epoch(*args, **kwargs)
        self._epoch_step_due = True

    def eval_epoch_end(self) -> None:
        """Call ``scheduler.step(run_history.current_epoch + 1)`` after a training epoch's evaluation."""
        super().eval_epoch_end()
        due, self._epoch_step_due = self._epoch_step_due and self.in_training_run, False
        scheduler: Any = self.scheduler
        if due and scheduler is not None:
            scheduler.step(self.run_history.current_epoch + 1)


def replace_trainer_placeholder_values(trainer: Any, instance: Any) -> Any:
    """Fill :class:`TrainerPlaceholderValues` in a ``functools.partial`` from ``trainer``.

    Reads ``trainer.run_config`` and the lengths of the trainer's loaders; any other
    value is returned as it is.
    """
    if not isinstance(instance, partial):
        return instance
    rc = trainer.run_config
    per_epoch = rc.num_update_steps_per_epoch
    values = {
        "num_epochs": rc.num_epochs,
        "num_update_steps_per_epoch": per_epoch,
        "total_update_steps": getattr(rc, "total_update_steps", rc.num_epochs * per_epoch),
        "per_process_batch_size": getattr(rc, "train_per_device_batch_size", None),
        "eval_per_process_batch_size": getattr(rc, "eval_per_device_batch_size", None),
        "gradient_accumulation_steps": getattr(rc, "gradient_accumulation_steps", None),
        "num_processes": getattr(rc, "num_processes", None),
        "train_dataloader_len": safe_len(_loader(trainer, "train")),
        "eval_dataloader_len": safe_len(_loader(trainer, "eval")),
    }
    return resolve_placeholders(instance, values)


def _nodes() -> int:
    """How many machines the run spans (processes per node from the launcher)."""
    env = dist.read_env()
    return max(env.world_size // max(env.local_world_size, 1), 1)


def _loader(trainer: Any, kind: str) -> Any:
    found = getattr(trainer, f"{kind}_dataloader", None)
    return found if found is not None else getattr(trainer, f"_{kind}_dataloader", None)


__all__ = [
    "DEFAULT_CALLBACKS",
    "Trainer",
    "TrainerPlaceholderValues",
    "TrainerWithTimmScheduler",
    "replace_trainer_placeholder_values",
]
