"""The Trainer a ``TrainLoop`` runs: its hooks call the model's ``get_loss``/``get_predictions``.

Nothing here is a second loop. :class:`TTTrainer` overrides the core Trainer's hooks and
:class:`LoopEvents` turns the Trainer's events into the AIToolbox callback hooks and the
TrainLoop's counters and history.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from scramjet.callbacks.base import TrainerCallback
from scramjet.compat.aitoolbox.torchtrain.model import route_forward
from scramjet.compat.aitoolbox.torchtrain.multi_loss_optim import MultiLoss, MultiOptimizer
from scramjet.compat.aitoolbox.torchtrain.train_loop._loaders import loader_spec
from scramjet.runtime import distributed as dist
from scramjet.trainer import Trainer
from scramjet.trainer.batch import batch_size_of as core_batch_size_of
from scramjet.trainer.state import RunHistory

if TYPE_CHECKING:
    from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import TrainLoop

#: Core history name → ``train_history`` name, restored when a run resumes.
_RESTORED = (
    ("train_set_loss", "loss"),
    ("train_loss_epoch", "accumulated_loss"),
    ("eval_loss_epoch", "val_loss"),
)

__all__ = ["LoopEvents", "OptimizerProxy", "TTTrainer", "batch_size_of", "per_loss_mean"]


def batch_size_of(batch: Any) -> int:
    """Samples in a collated batch, counted as the Trainer counts them: in an ``(inputs,
    targets, ...)`` sequence the targets' first dimension (a time-major ``[T, B, F]``
    input, ``nn.LSTM``'s default layout, has the B samples its ``[B]`` targets have), else
    the first tensor's rows; a list of per-sample dicts counts its records, a list of plain
    values its length."""
    if isinstance(batch, list | tuple) and batch:
        if not any(isinstance(b, torch.Tensor | Mapping | list | tuple) for b in batch):
            return len(batch)
        if len(batch) >= 2 and not all(isinstance(b, Mapping) for b in batch):
            return core_batch_size_of(batch[0], batch[1])
    return core_batch_size_of(batch, None)


def per_loss_mean(parts: Sequence[tuple[Mapping[str, Any], int]]) -> dict[str, float]:
    """Mean per sample of each named loss over ``(losses of a batch, batch size)`` pairs."""
    total = sum(n for _, n in parts)
    return {k: sum(float(p[k]) * n for p, n in parts) / total for k in parts[0][0]}


def _check_loss(raw: Any, method: str) -> None:
    """Refuse a loss that cannot be backpropagated, naming what ``method`` returned."""
    if isinstance(raw, torch.Tensor | MultiLoss):
        return
    if callable(getattr(raw, "detach", None)) and callable(getattr(raw, "backward", None)):
        return
    raise TypeError(
        f"{method}(batch, criterion, device) must return the batch's loss as a tensor that "
        f"requires grad (or a MultiLoss); received {type(raw).__name__} ({raw!r:.80}). Return "
        f"criterion(outputs, targets) itself, not loss.item() or float(loss)."
    )


def _check_predictions(output: Any, method: str) -> None:
    """Refuse a ``get_predictions`` result that is not ``(y_pred, y_true, metadata)``."""
    if isinstance(output, tuple | list) and len(output) == 3:
        return
    got = (
        f"a {type(output).__name__} of {len(output)}"
        if isinstance(output, tuple | list)
        else (type(output).__name__)
    )
    raise TypeError(
        f"{method}(batch, device) must return three values, (y_pred, y_true, metadata); "
        f"received {got}. Return e.g. (predictions.cpu(), targets.cpu(), {{}}) (metadata may "
        f"be an empty dict or None)."
    )


def _batch_loss_value(raw: Any, divided: Any, window: int) -> Any:
    """A batch's loss as ``loss_batch_accum`` keeps it until read (then a float; a dict per
    loss for a :class:`MultiLoss`), before the division by the accumulation window; None
    for a loss that is no tensor. Kept detached on its device: no sync per step, and
    nothing is called on the loss object itself (AIToolbox's tests count ``detach()``)."""
    if isinstance(raw, MultiLoss):
        losses = raw.loss_dict.items()
        return {k: v.detach() for k, v in losses if isinstance(v, torch.Tensor)}
    if isinstance(raw, torch.Tensor):
        return raw.detach()
    if raw is None and isinstance(divided, torch.Tensor):
        return divided.detach() * window
    return None


class OptimizerProxy(torch.optim.Optimizer):
    """A torch optimizer in front of a :class:`MultiOptimizer` or any object with ``step``/``zero_grad``.

    Its parameter groups are the wrapped optimizers' own (so gradient scaling, clipping
    and learning-rate readers see the real ones); ``step`` and ``zero_grad`` call the
    wrapped object once: a :class:`MultiOptimizer` (or a subclass that steps its
    optimizers its own way) as AIToolbox's loop did, ``step(optimizer_idx, iteration,
    amp_grad_scaler)`` and ``zero_grad(optimizer_idx, iteration)`` for each optimizer. The
    scaler it gets is a disabled one: the Trainer's scaler has unscaled the gradients and
    skips the whole update on inf. The Trainer's own clearing of stale gradients before a
    run uses :meth:`clear_grads`, which touches only the parameters.
    """

    def __init__(self, wrapped: Any, model: nn.Module, iteration: Any = lambda: 0) -> None:
        inner = list(wrapped.optimizer_list) if isinstance(wrapped, MultiOptimizer) else [wrapped]
        groups = [g for o in inner for g in getattr(o, "param_groups", [])]
        params = [p for g in groups for p in g["params"]] or list(model.parameters())
        super().__init__(params or [torch.zeros((), requires_grad=True)], {})
        if groups:
            self.param_groups = groups
        self.wrapped = wrapped
        self.iteration = iteration  # the loop's total_iteration_idx, when asked
        self._no_scaler = torch.amp.GradScaler("cpu", enabled=False)  # step() is plain step()
        self.forward_zero_grad = False

    def step(self, closure: Any = None) -> Any:
        """Step every wrapped optimizer."""
        if isinstance(self.wrapped, MultiOptimizer):
            for idx in range(len(self.wrapped.optimizer_list)):
                self.wrapped.step(idx, self.iteration(), self._no_scaler)
            return None
        return self.wrapped.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The wrapped ``zero_grad`` inside the update hook; elsewhere only the parameters' gradients."""
        if not self.forward_zero_grad:
            super().zero_grad(set_to_none)
            return
        if isinstance(self.wrapped, MultiOptimizer):
            for idx in range(len(self.wrapped.optimizer_list)):
                self.wrapped.zero_grad(idx, self.iteration())
        else:
            self.wrapped.zero_grad()

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's state (a MultiOptimizer's is a list, kept under ``"optimizers"``)."""
        state = self.wrapped.state_dict()
        return state if isinstance(state, dict) else {"optimizers": state}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the wrapped optimizer's state."""
        self.wrapped.load_state_dict(state_dict.get("optimizers", state_dict))


class TTTrainer(Trainer):
    """The Trainer used by ``TrainLoop``: losses from ``get_loss``, predictions from ``get_predictions``.

    A loss may be a tensor, a :class:`MultiLoss` (one backward per optimizer) or any
    object with ``backward``/``detach``; the Trainer records its detached value. Each
    update fires ``on_after_gradient_update`` once per optimizer (gradients unscaled),
    and the loop's batch hooks through :class:`LoopEvents`.
    """

    custom_events = ("on_after_gradient_update",)

    def __init__(
        self,
        loop: TrainLoop,
        optimizer: torch.optim.Optimizer,
        callbacks: list[TrainerCallback],
        precision: str,
        device: torch.device | None,
    ) -> None:
        self.loop = loop
        self.train_loader_override: Any = None
        self.eval_loader_override: Any = None
        self.prediction_batches: list[tuple[Any, Any, Any]] = []
        self.loss_parts: list[tuple[dict[str, float], int]] = []
        self._raw_loss: Any = None
        self._train_batch_size = 1
        super().__init__(
            loop.model, None, optimizer, callbacks=callbacks, precision=precision, device=device
        )
        shared = getattr(loop, "amp_scaler", None)
        if self.scaler is not None and shared is not None and shared.is_enabled():
            # One scaler: the loop's scales a MultiLoss's backward (and is what AIToolbox's
            # checkpoints save), so it must also be the one that unscales and steps.
            self.scaler = shared

    def training_run_start(self) -> None:
        """A fresh run starts at the loop's ``epoch``: ``loop.epoch = 5; fit(num_epochs=10)`` trains 5.

        A run resumed from a checkpoint keeps the epoch it restored.
        """
        state, start = self.state, int(self.loop.epoch)
        fresh = not (state.epoch or state.global_step or state.batches_seen_in_epoch)
        if fresh and start > 0:
            state.epoch = start
        super().training_run_start()

    # ----------------------------------------------------------------- losses
    def _call_model(self, method: str, batch: Any) -> Any:
        loop, model = self.loop, self.unwrapped_model
        feed = getattr(loop, "batch_model_feed_def", None)
        if feed is not None:
            return getattr(feed, method)(model, batch, loop.criterion, self.device)
        if method == "get_loss_eval" and not hasattr(model, "get_loss_eval"):
            method = "get_loss"
        if not hasattr(model, method):  # a plain module: batches are (inputs, targets)
            x, y = batch[0].to(self.device), batch[1].to(self.device)
            return loop.criterion(self.model(x), y)
        get = getattr(model, method)
        if method == "get_loss" and isinstance(self.model, nn.parallel.DistributedDataParallel):
            with route_forward(model, get):
                return self.model(batch, loop.criterion, self.device)
        return get(batch, loop.criterion, self.device)

    def _window(self) -> tuple[int, bool]:
        """This micro-batch's accumulation window size and whether it ends with an update."""
        i, accum = self.state.batches_seen_in_epoch, self.run_config.gradient_accumulation_steps
        start, n = i - i % accum, self.batches_in_epoch
        end = min(start + accum, n) if n else start + accum
        return end - start, i + 1 == end

    @staticmethod
    def _recorded(
        raw: Any, parts: list[tuple[dict[str, float], int]] | None, size: int
    ) -> torch.Tensor:
        """The tensor the Trainer records for ``raw`` (a detached value for non-tensor losses)."""
        if isinstance(raw, torch.Tensor):
            return raw
        if isinstance(raw, MultiLoss):
            values = {k: torch.as_tensor(v.detach()).float() for k, v in raw.loss_dict.items()}
            if parts is not None:
                parts.append(({k: float(v) for k, v in values.items()}, size))
            value = torch.stack(list(values.values())).sum()
        else:
            value = torch.as_tensor(raw.detach()).float()
        return value.detach().clone().requires_grad_(torch.is_grad_enabled())

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        """``get_loss(batch, criterion, device)`` (through the feed definition of a ``ModelWrap``)."""
        self._raw_loss = raw = self._call_model("get_loss", batch)
        _check_loss(raw, "get_loss")
        self._train_batch_size = size = batch_size_of(batch)
        return {"loss": self._recorded(raw, None, size), "model_outputs": None, "batch_size": size}

    def calculate_eval_batch_loss(self, batch: Any) -> dict[str, Any]:
        """``get_loss_eval`` (or ``get_loss``) on an evaluation batch, under ``torch.no_grad``."""
        raw = self._call_model("get_loss_eval", batch)
        _check_loss(
            raw, "get_loss_eval" if hasattr(self.unwrapped_model, "get_loss_eval") else "get_loss"
        )
        size = batch_size_of(batch)
        return {
            "loss": self._recorded(raw, self.loss_parts, size),
            "model_outputs": None,
            "batch_size": size,
        }

    def backward_step(self, loss: torch.Tensor) -> None:
        """Backward of the loss; a non-tensor loss is divided by its window and backpropagated itself."""
        raw, self._raw_loss = self._raw_loss, None
        window, is_update = self._window()
        batch_loss = _batch_loss_value(raw, loss, window)
        if isinstance(raw, torch.Tensor) or raw is None:
            super().backward_step(loss)
        elif isinstance(raw, MultiLoss):
            raw = raw / window
            scaler = self.loop.amp_scaler
            for idx in range(len(raw.loss_dict)):
                raw.backward(idx, self.loop.total_iteration_idx, scaler)
        else:
            (raw / window).backward()
        self.loop._after_backward(self, is_update, batch_loss, self._train_batch_size)

    # ----------------------------------------------------------------- updates
    def clip_gradients(self) -> None:
        """``on_after_gradient_update(optimizer_idx)`` per optimizer (gradients unscaled), then clipping."""
        handler = self.loop.callbacks_handler
        if handler.cbs_on_after_gradient_update:
            if self.scaler is not None:
                self.scaler.unscale_(self.optimizer)
            optimizer = self.loop.optimizer
            count = len(optimizer.optimizer_list) if isinstance(optimizer, MultiOptimizer) else 1
            for idx in range(count):
                handler.execute_gradient_update(idx)
        self.callback_handler.call_event("on_after_gradient_update", self)
        super().clip_gradients()

    def optimizer_zero_grad(self) -> None:
        """Zero the gradients through the user's optimizer."""
        if isinstance(self.optimizer, OptimizerProxy):
            self.optimizer.forward_zero_grad = True
            try:
                self.optimizer.zero_grad()
            finally:
                self.optimizer.forward_zero_grad = False
        else:
            super().optimizer_zero_grad()

    # ----------------------------------------------------------------- evaluation, prediction
    @contextlib.contextmanager
    def _eval_source(self, loader: Any) -> Iterator[tuple[Any, int, dict[str, Any]]]:
        """``(dataset, batch size, DataLoader settings)`` to evaluate ``loader`` with (its
        own collate function, workers and ``drop_last``); a loader that cannot be rebuilt
        is used as is."""
        spec = loader_spec(loader, train=False)
        outer, self.eval_loader_override = self.eval_loader_override, loader if spec.as_is else None
        try:
            yield spec.dataset, spec.batch_size, spec.kwargs
        finally:
            self.eval_loader_override = outer

    def loss_on(self, loader: Any, label: str = "loss") -> Any:
        """Mean loss per sample over ``loader`` (a dict per loss for a :class:`MultiLoss`).

        Runs one evaluation epoch of the Trainer into a scratch history (at the run's
        epoch), so the run's own validation history is untouched; progress displays call
        the pass ``label``.
        """
        history, self.run_history = self.run_history, RunHistory()
        last = self.run_config.num_epochs if self.has_run_config else history.current_epoch
        self.run_history.current_epoch = min(history.current_epoch, last)  # a run's end: last
        eval_label, self.eval_label = self.eval_label, label
        eval_dataset, self.loss_parts = self.eval_dataset, []
        was_training = self.model.training
        try:
            with self._eval_source(loader) as (dataset, batch_size, kwargs):
                self.evaluate(dataset, batch_size, kwargs)
            loss = self.run_history.get_latest_metric("eval_loss_epoch")
        finally:
            self.run_history, self.eval_dataset = history, eval_dataset
            self.eval_label = eval_label
            self.model.train(was_training)
        parts, self.loss_parts = self.loss_parts, []
        return per_loss_mean(parts) if parts else loss

    def predict_step(self, batch: Any) -> torch.Tensor:
        """``get_predictions(batch, device)``, recorded in :attr:`prediction_batches`.

        Returns the batch's number once per sample: :meth:`predict` gathers these in
        dataset order, which tells the TrainLoop which recorded batches are this rank's.
        """
        loop, model = self.loop, self.unwrapped_model
        feed = getattr(loop, "batch_model_feed_def", None)
        if feed is not None:
            output = feed.get_predictions(model, batch, self.device)
        else:
            output = getattr(model, "get_predictions", None)
            if output is None:  # a plain module: batches are (inputs, targets)
                output = (model(batch[0].to(self.device)).cpu(), batch[1].cpu(), None)
            else:
                output = output(batch, self.device)
        _check_predictions(output, "get_predictions")
        self.prediction_batches.append(output)
        return torch.full((batch_size_of(batch),), len(self.prediction_batches) - 1)

    def predict_batches(self, loader: Any) -> list[tuple[Any, Any, Any]]:
        """``get_predictions`` output for each of this rank's batches of ``loader``, in order."""
        self.prediction_batches = []
        with self._eval_source(loader) as (dataset, batch_size, kwargs):
            numbers = self.predict(dataset, batch_size, kwargs)
        recorded, self.prediction_batches = self.prediction_batches, []
        world, rank = dist.get_world_size(), dist.get_rank()
        mine: list[int] = numbers[rank::world].tolist() if isinstance(numbers, torch.Tensor) else []
        return [recorded[i] for i in sorted(set(mine))]

    # ----------------------------------------------------------------- loaders
    def create_train_dataloader(
        self, batch_size: int, train_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """The user's loader when it cannot be rebuilt, else the Trainer's sharded, resumable one."""
        if self.train_loader_override is not None:
            loader: Iterable[Any] = self.train_loader_override
            return loader
        return super().create_train_dataloader(batch_size, train_dl_kwargs)

    def create_eval_dataloader(
        self, batch_size: int, eval_dl_kwargs: Mapping[str, Any] | None = None
    ) -> Iterable[Any]:
        """The user's loader when it cannot be rebuilt, else the Trainer's sharded one."""
        if self.eval_loader_override is not None:
            loader: Iterable[Any] = self.eval_loader_override
            return loader
        return super().create_eval_dataloader(batch_size, eval_dl_kwargs)


class LoopEvents(TrainerCallback):
    """Trainer events → the TrainLoop's counters, history and AIToolbox callback hooks."""

    def __init__(self, loop: TrainLoop) -> None:
        self.loop = loop

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Counters of a resumed run, then ``on_train_begin``."""
        state, loop = trainer.state, self.loop
        if state.global_step or state.batches_seen_in_epoch:  # resumed from a checkpoint
            per_epoch = trainer.batches_in_epoch or len(loop.train_loader)
            loop.epoch = state.epoch
            loop.total_iteration_idx = state.epoch * per_epoch + state.batches_seen_in_epoch - 1
            restored = trainer.run_history
            for core, name in _RESTORED:
                for value in restored.get_metric_values(core):
                    loop.insert_metric_result_into_history(name, value)
        loop.callbacks_handler.execute_train_begin()

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """The loop's ``epoch``, then ``on_epoch_begin``."""
        self.loop.epoch = trainer.state.epoch
        self.loop.loss_batch_accum = []
        self.loop.callbacks_handler.execute_epoch_begin()

    def on_train_step_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """The loop's ``iteration``, then ``on_batch_begin``."""
        self.loop.iteration = trainer.state.batches_seen_in_epoch
        self.loop._batch_start()
        self.loop.callbacks_handler.execute_batch_begin()

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """``on_after_optimizer_step``, then the update's ``on_batch_end``."""
        self.loop.callbacks_handler.execute_optimizer_step()
        self.loop._batch_end(trainer)

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """End-of-epoch losses into the history, ``on_epoch_end``, early stop."""
        self.loop._epoch_end(trainer)

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """The test-set loss into the history, then ``on_train_end``."""
        self.loop._train_end(trainer)
