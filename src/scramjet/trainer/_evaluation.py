"""The evaluation pass of the Trainer: :meth:`Trainer.evaluate`, :meth:`Trainer.run_evaluation`
and the evaluation that ends each training epoch run through here.

Kept apart from the loop in ``trainer.py``: an evaluation runs the Trainer's eval hooks
(``evaluation_run_start``, ``eval_epoch_start``, ``calculate_eval_batch_loss``, ...) and
its callbacks, and leaves a training epoch in progress as it found it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from scramjet.callbacks.base import Event
from scramjet.runtime import distributed as dist
from scramjet.runtime.devices import move_to_device
from scramjet.tracking._interrupts import raise_lost_ctrl_c
from scramjet.trainer._explain import explain_batch_error
from scramjet.trainer.checks import (
    check_loss,
    check_samples,
    empty_evaluation,
    ready_loader_batch_size,
)
from scramjet.trainer.data_order import Lockstep, yields_batches
from scramjet.trainer.state import RunConfig, last_trained_epoch, module_modes, restore_modes

if TYPE_CHECKING:
    from scramjet.trainer.trainer import DataSource, Trainer


def evaluate(
    trainer: Trainer,
    dataset: DataSource,
    batch_size: int,
    dataloader_kwargs: Mapping[str, Any] | None,
) -> None:
    """The body of :meth:`Trainer.evaluate` once its arguments are checked: inside a
    training run or standalone (whose batch size the run settings then record)."""
    standalone = not trainer._in_training_run
    if standalone:
        trainer._run_config = evaluation_run_config(trainer, dataset, batch_size)
    try:
        eval_dl = trainer.create_eval_dataloader(batch_size, dataloader_kwargs)
        if standalone:
            trainer._evaluate_dl = eval_dl
        with last_trained_epoch(trainer.run_history, standalone=standalone):
            evaluate_now(trainer, eval_dl)
    except BaseException:
        if standalone:  # inside train(), the run's own crash handler closes
            trainer.callback_handler.close_all(trainer)  # e.g. the progress bar stops drawing
        raise


def evaluate_now(trainer: Trainer, eval_dl: Iterable[Any]) -> None:
    """An evaluation that leaves a training epoch in progress as it was: the module
    modes, its loader, the logging of its batches, and a pending end_epoch() (which must
    not end this evaluation and must still end the training epoch afterwards)."""
    modes = module_modes(trainer.model)
    outer = (trainer._end_epoch_requested, trainer._current_dl, trainer._in_train_batches)
    trainer._end_epoch_requested = trainer._in_train_batches = False
    try:
        run_evaluation(trainer, eval_dl)
    finally:
        trainer._end_epoch_requested, trainer._current_dl, trainer._in_train_batches = outer
        restore_modes(modes)


def run_evaluation(trainer: Trainer, eval_dl: Iterable[Any]) -> None:
    """One evaluation run: its start and end hooks and events around one epoch."""
    trainer.evaluation_run_start()
    trainer.callback_handler.call_event(Event.EVALUATION_RUN_START, trainer)
    run_eval_epoch(trainer, eval_dl)
    trainer.evaluation_run_end()
    trainer.callback_handler.call_event(Event.EVALUATION_RUN_END, trainer)


def run_eval_epoch(trainer: Trainer, eval_dl: Iterable[Any]) -> None:
    handler = trainer.callback_handler
    # Evaluate through the unwrapped module: ranks may hold different numbers of
    # batches (no padding), and the DDP wrapper would try to sync buffers. (An FSDP
    # model is sharded in place: the unwrapped module is the sharded one.)
    wrapped, trainer.model = trainer.model, trainer._unwrapped_model
    trainer._current_dl = eval_dl
    try:
        trainer.eval_losses.start_epoch()
        trainer.eval_epoch_start()
        handler.call_event(Event.EVAL_EPOCH_START, trainer)
        steps, seen = Lockstep(eval_dl, trainer._collective_forwards()), 0
        with torch.no_grad():
            for batch, real in steps:
                raise_lost_ctrl_c()
                eval_step(trainer, batch, real)
                seen += 1
                if trainer._end_epoch_requested:  # every rank stops before the next step
                    steps.stop()
        if not seen and dist.get_world_size() == 1:
            raise empty_evaluation(eval_dl)
        trainer._end_epoch_requested = False
        trainer.eval_epoch_end()
        if trainer._epoch_eval and trainer.state.train_done:  # the epoch's, not a cut one's
            trainer.state.eval_done = True
        handler.call_event(Event.EVAL_EPOCH_END, trainer)
    finally:
        trainer.model, trainer._current_dl, trainer._epoch_eval = wrapped, None, False


def eval_step(trainer: Trainer, batch: Any, real: bool) -> None:
    """One evaluation batch; a repeated one (``real`` False) only keeps ranks in step."""
    handler = trainer.callback_handler
    if trainer.device.type != "cpu":
        batch = move_to_device(batch, trainer.device, non_blocking=True)
    if real and handler.has(Event.EVAL_STEP_START):
        handler.call_event(Event.EVAL_STEP_START, trainer)
    with trainer._autocast():
        try:
            batch_output = trainer.calculate_eval_batch_loss(batch)
        except (RuntimeError, TypeError, ValueError) as error:  # float64 inputs, float32 model
            explain_batch_error(error, trainer._unwrapped_model, batch, "evaluation")
            raise
    if not real:
        return
    check_loss(batch_output, "calculate_eval_batch_loss")
    check_samples(batch_output, len(trainer.eval_losses.losses) + 1)
    trainer.eval_losses.add(batch_output["loss"], batch_output["batch_size"])
    if handler.has(Event.EVAL_STEP_END):
        handler.call_event(Event.EVAL_STEP_END, trainer, batch=batch, batch_output=batch_output)


def evaluation_run_config(trainer: Trainer, data: DataSource, batch_size: int) -> RunConfig:
    """The last train()'s settings (if any) with a standalone evaluation's batch size."""
    if yields_batches(data):
        batch_size = ready_loader_batch_size(data, batch_size)
    if trainer._run_config is None:
        return trainer._create_run_config(1, batch_size, batch_size, None, 1, (None, None))
    return dataclasses.replace(trainer._run_config, eval_per_device_batch_size=batch_size)
