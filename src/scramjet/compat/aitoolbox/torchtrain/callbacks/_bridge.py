"""How AIToolbox hooks meet the Trainer's events.

:func:`to_trainer_callback` turns one :class:`AbstractCallback` into a
:class:`~scramjet.callbacks.TrainerCallback` that calls its overridden hooks on the
matching events. After the hooks of an event have run, a ``train_loop_obj.early_stop``
set by one of them (AIToolbox's way to stop) ends the run through
:class:`~scramjet.callbacks.StopTrainingError`, and the adapter carries the callback's
own ``state_dict``/``load_state_dict`` (if it has them) into training checkpoints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from scramjet.callbacks.base import StopTrainingError, TrainerCallback
from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback

if TYPE_CHECKING:
    from scramjet.trainer import Trainer

#: AIToolbox hook → Trainer events that call it.
HOOK_EVENTS: dict[str, tuple[str, ...]] = {
    "on_train_begin": ("on_training_run_start",),
    "on_epoch_begin": ("on_train_epoch_start",),
    "on_batch_begin": ("on_train_step_start",),
    "on_after_gradient_update": ("on_after_gradient_update",),
    "on_after_optimizer_step": ("on_optimizer_step_end",),
    "on_batch_end": ("on_optimizer_step_end",),
    "on_epoch_end": ("on_training_run_epoch_end",),
    "on_train_end": ("on_training_run_end",),
}

#: Run-history name → AIToolbox ``train_history`` name (other metrics keep their names).
HISTORY_NAMES: dict[str, str] = {"train_loss_epoch": "loss", "eval_loss_epoch": "val_loss"}


def history_key(name: str) -> str:
    """The run-history name of an AIToolbox ``train_history`` name (``"val_loss"`` → ``"eval_loss_epoch"``)."""
    return next((key for key, aitb in HISTORY_NAMES.items() if aitb == name), name)


def overridden_hooks(callback: AbstractCallback) -> list[str]:
    """The hooks ``callback``'s class overrides (the others do nothing)."""
    return [
        hook
        for hook in HOOK_EVENTS
        if getattr(type(callback), hook) is not getattr(AbstractCallback, hook)
    ]


def _runs_here(callback: AbstractCallback, trainer: Trainer) -> bool:
    if callback.device_idx_execution is None or trainer.num_processes <= 1:
        return True
    return bool(torch.distributed.get_rank() == callback.device_idx_execution)


def _make_handler(callback: AbstractCallback, hooks: list[str]) -> Any:
    def handler(self: TrainerCallback, trainer: Trainer, **kwargs: Any) -> None:
        if not _runs_here(callback, trainer):
            return
        for hook in hooks:
            getattr(callback, hook)()
        loop = callback.train_loop_obj
        if loop is not None and getattr(loop, "early_stop", False):
            raise StopTrainingError(f"{callback.callback_name} stopped training (early_stop).")

    return handler


def to_trainer_callback(callback: AbstractCallback, loop: Any) -> TrainerCallback:
    """A TrainerCallback that calls ``callback``'s overridden AIToolbox hooks on their events.

    Only the events whose hooks are overridden are defined, so an idle hook costs nothing
    per step. A callback whose work a core callback does (its ``trainer_callback``
    attribute) gives that core callback instead.
    """
    callback.register_train_loop_object(loop)
    core: TrainerCallback | None = getattr(callback, "trainer_callback", None)
    if core is not None:
        return core
    events: dict[str, list[str]] = {}
    for hook in overridden_hooks(callback):
        for event in HOOK_EVENTS[hook]:
            events.setdefault(event, []).append(hook)
    attrs: dict[str, Any] = {
        event: _make_handler(callback, hooks) for event, hooks in events.items()
    }
    attrs["custom_events"] = ("on_after_gradient_update",)
    attrs["wrapped"] = callback
    if callable(getattr(callback, "state_dict", None)):
        attrs["state_dict"] = lambda self: callback.state_dict()  # type: ignore[attr-defined]
        attrs["load_state_dict"] = lambda self, state: callback.load_state_dict(state)  # type: ignore[attr-defined]
    cls = type(f"AIToolbox{type(callback).__name__}", (TrainerCallback,), attrs)
    adapter: TrainerCallback = cls()
    return adapter
