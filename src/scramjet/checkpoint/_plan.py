"""A run's plan (its length in optimizer updates, its training dataset's length) as a
checkpoint records it, and the warnings for a resume whose plan or data differ."""

from __future__ import annotations

import warnings
from collections.abc import Sized
from typing import TYPE_CHECKING, Any

from scramjet.runtime.stacklevel import user_stacklevel

if TYPE_CHECKING:
    from scramjet.trainer import Trainer


def run_plan(trainer: Trainer) -> dict[str, int] | None:
    """The run's length in optimizer updates (0 if unknown), how it was worked out, and
    the training dataset's length when known; None for a run configuration that holds
    no numbers (a stand-in object)."""
    config = trainer.run_config
    epochs, per_epoch = config.num_epochs, config.num_update_steps_per_epoch
    cap = config.max_num_train_steps or 0
    if not all(type(v) is int for v in (epochs, per_epoch, cap)):
        return None
    total = cap or epochs * per_epoch
    plan = {"updates": total, "num_epochs": epochs, "updates_per_epoch": per_epoch}
    samples = _train_samples(trainer)
    if samples:  # a mid-epoch resume on a dataset of another length is told so
        plan["train_samples"] = samples
    return plan


def _train_samples(trainer: Trainer) -> int:
    """The training dataset's length (0 when unknown: a stream, no run yet)."""
    loader = trainer.train_dataloader
    data = getattr(loader, "dataset", None) if loader is not None else None
    if data is None:
        data = getattr(trainer, "train_dataset", None)
    if data is None or data is loader:
        return 0
    try:
        return len(data) if isinstance(data, Sized) else 0
    except TypeError:  # an IterableDataset whose __len__ raises
        return 0


def warn_if_data_changed(trainer: Trainer, saved: Any) -> None:
    """A resume inside an epoch on a training dataset of another length: the epoch's order
    is a permutation of the dataset's positions, so the positions the saved run consumed
    are not the samples this run skips; some of the epoch's samples are trained twice and
    others not at all (later epochs are whole)."""
    before = saved.get("train_samples") if isinstance(saved, dict) else None
    now = _train_samples(trainer)
    state = trainer.state
    if not before or not now or int(before) == now or not state.batches_seen_in_epoch:
        return
    warnings.warn(
        f"Resuming inside epoch {state.epoch + 1} ({state.batches_seen_in_epoch} batches "
        f"in) with a training dataset of {now} samples; the checkpoint was saved by a run "
        f"whose dataset held {int(before)}. The rest of this epoch is drawn from a new order "
        f"of the {now} samples, so some of them are trained twice in this epoch and others "
        f"not at all (the following epochs are whole). To resume exactly, pass the dataset "
        f"the run was saved with; to change the data, do it when resuming from a checkpoint "
        f"saved at the end of an epoch.",
        stacklevel=user_stacklevel(),
    )


def warn_if_replanned(trainer: Trainer, saved: Any) -> None:
    now = run_plan(trainer) if trainer.has_run_config else None
    # A checkpoint without a plan, a length unknown to either run, or the same length
    if now is None or not now["updates"] or not isinstance(saved, dict):
        return
    if not saved.get("updates") or int(saved["updates"]) == now["updates"]:
        return
    warnings.warn(
        f"Resuming a run planned for {int(saved['updates'])} optimizer updates "
        f"({saved.get('num_epochs')} epochs of {saved.get('updates_per_epoch')}) in a run "
        f"planned for {now['updates']} ({now['num_epochs']} of {now['updates_per_epoch']}): "
        f"the restored {type(trainer.scheduler).__name__} keeps the length it was built "
        f"with, so the learning rate follows the old plan "
        f"({_old_plan_effect(trainer, int(saved['updates']) < now['updates'])}). "
        f"To train on a new schedule, start a run from "
        f"the checkpoint's weights: trainer.load_checkpoint(path, load_optimizer=False, "
        f"load_training_state=False), then train().",
        stacklevel=4,
    )


def _old_plan_effect(trainer: Trainer, longer: bool) -> str:
    """What keeping the old schedule does to the learning rate of the new run."""
    if not longer:
        return "the run ends before the schedule does, above its final learning rate"
    name = type(trainer.scheduler).__name__
    if name == "OneCycleLR":
        return "OneCycleLR raises an error past its end"
    if name == "CosineAnnealingLR":
        return "past its end, CosineAnnealingLR turns back up"
    if name == "CosineWarmupScheduler":
        return (
            "past its end it stays at its minimum, min_lr_ratio x the base rate: with the "
            "default 0 the extra updates train nothing"
        )
    return "past its end, it goes on as the scheduler defines"
