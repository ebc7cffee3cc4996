"""A run resumed from a checkpoint that ``trainer.stop_training()`` had ended (or a
callback's ``StopTrainingError``: :meth:`CallbackHandler.call_event` records it; the same
command run again with ``resume_from="auto"`` after a crash past ``train()``, a requeue)
stops before training, unless it plans a longer run than the stopped one. A checkpoint
named by its path continues the stopped run, as pytorch-accelerated's resume does."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from scramjet.callbacks.base import StopTrainingError
from scramjet.trainer.checks import warn_if_nothing_left

if TYPE_CHECKING:
    from scramjet.trainer import Trainer


def check_resumed(trainer: Trainer, resume_from: str | os.PathLike[str]) -> None:
    """After ``train(resume_from=...)`` restored a checkpoint: warn when it is past this
    run's end; only ``"auto"`` (the same command run again) keeps a stop it recorded."""
    warn_if_nothing_left(trainer.state, trainer.run_config)
    if resume_from != "auto":
        trainer.state.resumed_stopped_run = False


def start_planned_run(trainer: Trainer) -> None:
    """Record the run's plan in its counters (its checkpoints keep it); raise
    :class:`StopTrainingError` for a rerun of a run that ``stop_training()`` ended whose
    ``num_epochs`` and ``max_num_train_steps`` are no larger than that run's."""
    state, config = trainer.state, trainer.run_config
    plan = (int(config.num_epochs), int(config.max_num_train_steps or 0))
    stopped, state.resumed_stopped_run = state.resumed_stopped_run, False
    before, state.planned = state.planned, plan
    longer = plan[0] > before[0] or (plan[1] > before[1] > 0)
    if not stopped or longer:
        return
    state.planned = before  # a checkpoint saved now still holds the stopped run's plan
    state.stop_requested = True
    cap = f", max_num_train_steps={before[1]}" if before[1] else ""
    err = StopTrainingError(
        f"The checkpoint resumed from was saved by a run that trainer.stop_training() (or a "
        f"callback's StopTrainingError) had ended (at step {state.global_step}; it had planned num_epochs={before[0]}{cap}); "
        f"nothing more is trained. To train on, pass a larger num_epochs (or "
        f"max_num_train_steps) than that run planned; to start afresh, resume_from=None."
    )
    trainer.print(err, flush=True)
    raise err
