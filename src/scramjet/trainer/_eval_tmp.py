"""Evaluation and prediction loops of the :class:`~scramjet.trainer.Trainer`.

The hooks they call (``evaluation_run_start``, ``eval_epoch_start``,
``calculate_eval_batch_loss``, ``eval_epoch_end``, ``predict_step``, ...) live on the
Trainer and are overridden there; this module holds the orchestration only.

Across processes each rank takes its own share of the data without padding
(:class:`~scramjet.trainer.data_order.ShardSampler`), so no sample is counted twice. When the
model is sharded with FSDP every forward is a collective: ranks whose share runs out
first repeat their last batch and discard its outputs (:class:`~scramjet.trainer.data_order.Lockstep`),
so every rank runs the same number of forwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import IterableDataset

from scramjet.callbacks.base import Event
from scramjet.runtime import distributed as dist
from scramjet.runtime.devices import move_to_device
from scramjet.runtime.precision import autocast_context
from scramjet.trainer.checks import check_batch_size, check_dataset, check_loss
from scramjet.trainer.data_order import Lockstep

if TYPE_CHECKING:
    from scramjet.trainer import Trainer
    from scramjet.trainer.state import RunConfig


class EvaluationMixin:
    """Evaluation and prediction methods of :class:`~scramjet.trainer.Trainer`.

    Methods annotate ``self`` as the Trainer they are mixed into (hence the
    ``type: ignore[misc]`` on their signatures).
    """

    run_config: RunConfig | None

    def _collective_forwards(self: Trainer) -> bool:  # type: ignore[misc]
        """Whether every forward is a collective (FSDP across processes)."""
        return self._sharded and dist.is_distributed()

    def _run_evaluation(self: Trainer, eval_dl: Iterable[Any]) -> None:  # type: ignore[misc]
        self.evaluation_run_start()
        self.callback_handler.call_event(Event.EVALUATION_RUN_START, self)
        self._run_eval_epoch(eval_dl)
        self.evaluation_run_end()
        self.callback_handler.call_event(Event.EVALUATION_RUN_END, self)

    def _run_eval_epoch(self: Trainer, eval_dl: Iterable[Any]) -> None:  # type: ignore[misc]
        handler = self.callback_handler
        # Evaluate through the unwrapped module: ranks may hold different numbers of
        # batches (no padding), and the DDP wrapper would try to sync buffers. (An FSDP
        # model is sharded in place: the unwrapped module is the sharded one.)
        wrapped, self.model = self.model, self._unwrapped_model
        outer, self._current_dl = getattr(self, "_current_dl", None), eval_dl
        try:
            self.eval_epoch_start()
            handler.call_event(Event.EVAL_EPOCH_START, self)
            has_start, has_end = (
                handler.has(Event.EVAL_STEP_START),
                handler.has(Event.EVAL_STEP_END),
            )
            on_device = self.device.type != "cpu"
            steps = Lockstep(eval_dl, self._collective_forwards())
            with torch.no_grad():
                for batch, real in steps:
                    if on_device:
                        batch = move_to_device(batch, self.device, non_blocking=True)
                    if has_start and real:
                        handler.call_event(Event.EVAL_STEP_START, self)
                    with autocast_context(self.precision, self.device.type):
                        batch_output = self.calculate_eval_batch_loss(batch)
                    if not real:  # a repeated batch only keeps the forwards in step
                        continue
                    check_loss(batch_output, "calculate_eval_batch_loss")
                    self._record_loss(self._eval_losses, batch_output)
                    if has_end:
                        handler.call_event(
                            Event.EVAL_STEP_END, self, batch=batch, batch_output=batch_output
                        )
                    if self._end_epoch_requested:  # every rank stops before the next step
                        steps.stop()
            self._end_epoch_requested = False
            self.eval_epoch_end()
            handler.call_event(Event.EVAL_EPOCH_END, self)
        finally:
            self.model = wrapped
            self._current_dl = outer

    def evaluate(  # type: ignore[misc]
        self: Trainer,
        dataset: Any,
        per_device_batch_size: int = 8,
        dataloader_kwargs: Mapping[str, Any] | None = None,
        collate_fn: Callable[..., Any] | None = None,
    ) -> None:
        """Run one evaluation epoch over ``dataset``; ``eval_loss_epoch`` is recorded."""
        check_dataset(dataset, "dataset")
        check_batch_size(per_device_batch_size, "per_device_batch_size")
        self.eval_dataset, self.collate_fn = dataset, collate_fn
        self._place_model()
        if self.run_config is None:
            self.run_config = self._create_run_config(
                1, per_device_batch_size, per_device_batch_size, None, 1, None, None
            )
        eval_dl = self.create_eval_dataloader(per_device_batch_size, dataloader_kwargs)
        self._run_evaluation(eval_dl)

    def predict(  # type: ignore[misc]
        self: Trainer,
        dataset: Any,
        per_device_batch_size: int = 8,
        dataloader_kwargs: Mapping[str, Any] | None = None,
        collate_fn: Callable[..., Any] | None = None,
    ) -> Any:
        """Model outputs for every sample of ``dataset``, in dataset order.

        Across processes, each rank predicts its share and the outputs are gathered on
        every rank without the sampler's padding (N samples → exactly N outputs).
        Tensors are concatenated along the first dimension; other outputs come back as a
        list with one entry per batch.
        """
        check_dataset(dataset, "dataset")
        check_batch_size(per_device_batch_size, "per_device_batch_size")
        world = dist.get_world_size()
        if world > 1 and not isinstance(dataset, IterableDataset) and len(dataset) < world:
            # Every rank must hold a sample: gathering needs each rank's output shape.
            raise ValueError(
                f"predict() on {world} processes needs at least {world} samples; received "
                f"{len(dataset)}. Predict small datasets in a single process."
            )
        self.eval_dataset, self.collate_fn = dataset, collate_fn
        self._place_model()
        dl = self.create_eval_dataloader(per_device_batch_size, dataloader_kwargs)
        model, was_training = self._unwrapped_model, self._unwrapped_model.training
        wrapped, self.model = self.model, model
        outputs: list[Any] = []
        try:
            model.eval()
            with torch.no_grad():
                for batch, real in Lockstep(dl, self._collective_forwards()):
                    batch = move_to_device(batch, self.device, non_blocking=True)
                    with autocast_context(self.precision, self.device.type):
                        output = self.predict_step(batch)
                    if real:  # a repeated batch only kept the forwards in step
                        outputs.append(output)
        finally:
            self.model = wrapped
            model.train(was_training)
        return _collect_predictions(outputs, _safe_len(dataset))

    def run_evaluation(self: Trainer) -> None:  # type: ignore[misc]
        """Evaluate on the run's ``eval_dataset`` now (e.g. every N steps), then resume training."""
        eval_dl = getattr(self, "_eval_dl", None)
        if eval_dl is None:
            raise ValueError("run_evaluation() needs train(..., eval_dataset=...) to be running.")
        was_training = self.model.training
        # An end_epoch() asked for by the training epoch must not end this evaluation, and
        # must still end the training epoch afterwards.
        pending, self._end_epoch_requested = self._end_epoch_requested, False
        self._run_evaluation(eval_dl)
        self._end_epoch_requested = pending
        self.model.train(was_training)


def _safe_len(obj: Any) -> int:
    try:
        return len(obj)
    except TypeError:
        return 0


def _collect_predictions(outputs: list[Any], num_samples: int) -> Any:
    """Concatenate per-batch outputs; across processes, gather and restore dataset order."""
    world = dist.get_world_size()
    if outputs and all(isinstance(o, torch.Tensor) for o in outputs):
        local = torch.cat([o.detach() for o in outputs]).cpu()
        if world == 1:
            return local
        gathered = dist.gather(local)  # [rank 0 rows, rank 1 rows, ...]
        # Rank r predicted samples r, r + W, ... (ShardSampler): put them back in order.
        positions = [list(range(r, num_samples, world)) for r in range(world)]
        order = torch.tensor([p for part in positions for p in part])
        result = torch.empty_like(gathered)
        result[order] = gathered
        return result
    if outputs and all(isinstance(o, Mapping) for o in outputs):
        return {k: _collect_predictions([o[k] for o in outputs], num_samples) for k in outputs[0]}
    if world > 1:
        raise TypeError(
            "predict() across processes needs predict_step to return tensors (or dicts of "
            f"tensors) with one row per sample; received "
            f"{type(outputs[0]).__name__ if outputs else 'nothing'}."
        )
    return outputs
