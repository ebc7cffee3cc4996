"""The distributed wrapper follows the parameters that are trainable.

``DistributedDataParallel`` reduces the gradients of the parameters that required them
when it was built, and only those. Fine-tuning code freezes and unfreezes layers between
runs and inside them (in ``training_run_start`` or ``train_epoch_start``, or their
callback events): a wrapper built before such a change would leave the newly unfrozen
layers unreduced, so the processes' weights drift apart, and fails on newly frozen
ones. The Trainer builds a new wrapper when the set of trainable parameters has changed
since the last one was built, checked after each epoch's start events (so after
``training_run_start``, its events, and any change between two ``train()`` calls), before
the epoch's first batch. Every process reaches that point together, so the new wrappers
are built in step.
"""

from __future__ import annotations

from typing import Any

from torch import nn


def trainable(model: nn.Module) -> tuple[bool, ...]:
    """Which of ``model``'s parameters require gradients, in order."""
    return tuple(p.requires_grad for p in model.parameters())


def rewrap_if_trainable_changed(trainer: Any) -> None:
    """Wrap ``trainer``'s model again if its trainable parameters changed since it was
    wrapped (nothing to do for a model that is not wrapped: one process, FSDP)."""
    model, before = trainer.unwrapped_model, getattr(trainer, "_trainable_at_wrap", None)
    if trainer.model is model or before is None or trainable(model) == before:
        return
    trainer.model = trainer.wrap_model(model)
    trainer._trainable_at_wrap = trainable(model)
