"""Saving and restoring the Trainer's complete training state (exact resume).

A training checkpoint holds everything that decides what happens next: model,
optimizer, scheduler, GradScaler, the loop counters (optimizer step, epoch, batches
consumed in the epoch), the run history, the losses of the unfinished epoch, every
callback's state (EMA weights, early-stopping counters, ...), the sampler seed and the
RNG states of every rank (Python, NumPy, torch CPU and CUDA). Resuming rebuilds the
epoch's sampler order from the seed and skips the consumed indices, so no batch is
repeated or skipped and no skipped batch is loaded or run through the model.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from scramjet.checkpoint.manager import CheckpointManager, write_checkpoint
from scramjet.runtime import distributed as dist
from scramjet.runtime import fsdp
from scramjet.runtime.seeding import get_rng_states, set_rng_states

if TYPE_CHECKING:
    from scramjet.trainer import Trainer


def _callback_key(index: int, callback: object) -> str:
    return f"{index}:{type(callback).__name__}"


def _this_rank(per_rank: Any) -> Any:
    """This rank's entry of a per-rank list (rank 0's if the world size changed)."""
    if isinstance(per_rank, torch.Tensor) or not per_rank:
        return per_rank  # a single value (older checkpoints) or nothing
    if not isinstance(per_rank[0], list | torch.Tensor):
        return per_rank  # older checkpoints: a flat list of counts
    rank = dist.get_rank() if len(per_rank) == dist.get_world_size() else 0
    return per_rank[rank]


def _has_pending_gradients(trainer: Trainer) -> bool:
    """Whether gradients of an unfinished accumulation window are held (one device sync)."""
    grads = [p.grad for p in trainer.unwrapped_model.parameters() if p.grad is not None]
    grads = [g.to_local() if hasattr(g, "to_local") else g for g in grads]  # FSDP: own shard
    return bool(grads) and bool(torch.stack([g.detach().abs().sum() for g in grads]).sum() > 0)


# What a checkpoint holds besides weights and optimizer: the state of the run itself.
_TRAINING_STATE_KEYS = (
    "trainer_state",
    "run_history",
    "epoch_losses",
    "epoch_loss_counts",
    "callbacks",
    "sampler_seed",
    "rng",
)


class _Fixed:
    """A checkpoint entry whose state was computed beforehand (FSDP: gathered collectively)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self._state = state

    def state_dict(self) -> dict[str, Any]:
        return self._state

    def load_state_dict(self, state: dict[str, Any]) -> None:  # pragma: no cover - never loaded
        raise TypeError("a saved snapshot cannot be loaded into")


class _FullStateTarget:
    """Loads an unsharded state dict into a sharded model (or its optimizer) on every rank."""

    def __init__(self, model: Any, optimizer: torch.optim.Optimizer | None = None) -> None:
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict[str, Any]:  # pragma: no cover - only loaded into
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.optimizer is None:
            fsdp.load_full_model_state(self.model, state)
        else:
            fsdp.load_full_optimizer_state(self.model, self.optimizer, state)


class TrainingStateMixin:
    """Checkpoint methods of :class:`~scramjet.trainer.Trainer`.

    Methods annotate ``self`` as the Trainer they are mixed into (hence the
    ``type: ignore[misc]`` on their signatures).
    """

    _epoch_finished: bool = False
    _sampler_seed: int | None
    _resumed_losses: tuple[list[torch.Tensor], list[int]] | None

    def training_state(self: Trainer, *, include_optimizer: bool = True) -> dict[str, Any]:  # type: ignore[misc]
        """Everything needed to resume, as entries for :class:`CheckpointManager`.

        Collective in a distributed run (every rank must call it): RNG states of all
        ranks are gathered so that each rank resumes with its own.
        """
        if getattr(self, "_in_training_run", False) and _has_pending_gradients(self):
            warnings.warn(
                "Saving inside an accumulation window: the gradients accumulated so far are "
                "not saved, so resuming from this checkpoint is not exact. Save from "
                "on_optimizer_step_end or at the end of an epoch (as "
                "SaveTrainingStateCallback does).",
                stacklevel=3,
            )
        state: dict[str, Any] = {"model": self.unwrapped_model}
        if include_optimizer:
            state["optimizer"] = self.optimizer
        if self._sharded:  # FSDP: gather full state dicts (collective); rank 0 gets them
            model_sd, optim_sd = fsdp.full_state_dicts(
                self.unwrapped_model, self.optimizer if include_optimizer else None
            )
            state["model"] = _Fixed(model_sd)
            if optim_sd is not None:
                state["optimizer"] = _Fixed(optim_sd)
        if include_optimizer:
            if self.scheduler is not None:
                state["scheduler"] = self.scheduler
            if self.scaler is not None:
                state["scaler"] = self.scaler
        counters = self.state.state_dict()
        history = self.run_history.state_dict()
        losses, counts = getattr(self, "_train_losses", ([], []))
        if self._epoch_finished:
            # Saved between epochs: the next run starts the next epoch from its start.
            counters.update(epoch=counters["epoch"] + 1, batches_seen_in_epoch=0)
            history["epoch"] += 1
            losses, counts = [], []
        state["trainer_state"] = counters
        state["run_history"] = history
        state["callbacks"] = {
            _callback_key(i, cb): cb.state_dict() for i, cb in enumerate(self.callbacks)
        }
        state["sampler_seed"] = int(self._sampler_seed or 0)
        # Per-rank parts, gathered in one collective: each rank resumes with its own RNG
        # states and its own losses of the unfinished epoch (only rank 0 writes the file).
        local = {
            "rng": get_rng_states(),
            "losses": torch.stack([t.float().cpu() for t in losses]) if losses else torch.zeros(0),
            "counts": list(counts),
        }
        per_rank = dist.gather_object(local)
        state["rng"] = [part["rng"] for part in per_rank]
        state["epoch_losses"] = [part["losses"] for part in per_rank]
        state["epoch_loss_counts"] = [part["counts"] for part in per_rank]
        return state

    def save_checkpoint(  # type: ignore[misc]
        self: Trainer,
        save_path: str | os.PathLike[str],
        checkpoint_kwargs: dict[str, Any] | None = None,
        save_optimizer: bool = True,
    ) -> None:
        """Write the training state to one file, atomically (rank 0 writes; all ranks call).

        ``checkpoint_kwargs`` are extra plain values stored alongside (returned by
        :meth:`load_checkpoint`).
        """
        state = self.training_state(include_optimizer=save_optimizer)
        state.update(checkpoint_kwargs or {})
        if self.is_main_process:
            write_checkpoint(save_path, state, step=self.state.global_step, epoch=self.state.epoch)
        dist.barrier()

    def save_to_manager(self: Trainer, manager: CheckpointManager | None) -> Path | None:  # type: ignore[misc]
        """Save the training state as the next checkpoint of ``manager`` (all ranks call)."""
        state = self.training_state()
        metrics = {}
        for name in self.run_history.get_metric_names():
            value = self.run_history.get_latest_metric(name)
            if isinstance(value, int | float):
                metrics[name] = float(value)
        path = None
        if self.is_main_process and manager is not None:
            epoch = self.state.epoch + (1 if self._epoch_finished else 0)
            path = manager.save(state, step=self.state.global_step, epoch=epoch, metrics=metrics)
        dist.barrier()
        return path

    def load_checkpoint(  # type: ignore[misc]
        self: Trainer,
        checkpoint_path: str | os.PathLike[str],
        load_optimizer: bool = True,
        *,
        load_training_state: bool = True,
    ) -> dict[str, Any]:
        """Restore a checkpoint written by :meth:`save_checkpoint` (or a checkpoint directory).

        Args:
            checkpoint_path: the file, or a checkpoint directory (its latest checkpoint).
            load_optimizer: also restore the optimizer, scheduler and GradScaler.
            load_training_state: also restore the loop counters, the run history, the
                callbacks' state and the random number generators (what resuming needs).
                ``False`` loads weights (and optimizer, if asked) into the current run and
                leaves its history and counters as they are.

        Returns the plain values stored with it (including ``checkpoint_kwargs``).
        """
        return self._restore_training_state(
            checkpoint_path,
            include_optimizer=load_optimizer,
            include_training_state=load_training_state,
        )

    def _restore_training_state(  # type: ignore[misc]
        self: Trainer,
        path: str | os.PathLike[str],
        *,
        include_optimizer: bool = True,
        include_training_state: bool = True,
    ) -> dict[str, Any]:
        path = Path(path)
        if path.is_dir():
            manager = CheckpointManager(path, keep_last=None)
            which: str | Path = "latest"
        elif path.is_file():
            manager, which = CheckpointManager(path.parent, keep_last=None), path
        else:
            raise FileNotFoundError(
                f"resume_from={str(path)!r} does not exist. Pass a checkpoint file written by "
                f"trainer.save_checkpoint, or a directory written by SaveTrainingStateCallback "
                f"or CheckpointManager."
            )
        self._place_model()
        targets: dict[str, Any] = {"model": self.unwrapped_model}
        if include_optimizer:
            targets["optimizer"] = self.optimizer
            if self.scheduler is not None:
                targets["scheduler"] = self.scheduler
            if self.scaler is not None:
                targets["scaler"] = self.scaler
        if self._sharded:  # FSDP: every rank reads the full state and keeps its shard
            targets["model"] = _FullStateTarget(self.unwrapped_model)
            if include_optimizer:
                targets["optimizer"] = _FullStateTarget(self.unwrapped_model, self.optimizer)
        result = manager.load(targets, which=which)
        values = dict(result.values)
        if not include_training_state:
            for key in _TRAINING_STATE_KEYS:
                values.pop(key, None)
            return values
        self.state.load_state_dict(values.pop("trainer_state", {}))
        if "run_history" in values:
            self.run_history.load_state_dict(values.pop("run_history"))
        losses = _this_rank(values.pop("epoch_losses", []))
        counts = _this_rank(values.pop("epoch_loss_counts", []))
        losses = losses if isinstance(losses, torch.Tensor) else torch.zeros(0)
        self._resumed_losses = (list(losses.to(self.device).unbind(0)), list(counts or []))
        self._restore_callbacks(values.pop("callbacks", {}))
        self._sampler_seed = int(values.pop("sampler_seed", self._sampler_seed or 0))
        sampler: Any = getattr(getattr(self, "_train_dl", None), "sampler", None)
        if hasattr(sampler, "seed"):  # the epoch order follows the restored seed
            sampler.seed = int(self._sampler_seed or 0)
        self._restore_rng(values.pop("rng", None))
        return values

    def _restore_callbacks(self: Trainer, saved: dict[str, Any]) -> None:  # type: ignore[misc]
        for i, cb in enumerate(self.callbacks):
            key = _callback_key(i, cb)
            if key in saved:
                cb.load_state_dict(saved[key])
            elif cb.state_dict():
                warnings.warn(
                    f"The checkpoint holds no state for callback {key}; it starts fresh.",
                    stacklevel=3,
                )

    def _restore_rng(self: Trainer, per_rank: list[dict[str, Any]] | None) -> None:  # type: ignore[misc]
        if not per_rank:
            return
        rank, world = dist.get_rank(), dist.get_world_size()
        if len(per_rank) != world:
            warnings.warn(
                f"The checkpoint was saved by {len(per_rank)} process(es) and is resumed by "
                f"{world}; every rank takes rank 0's RNG state, so randomness differs from "
                f"an uninterrupted run.",
                stacklevel=3,
            )
            rank = 0
        set_rng_states(per_rank[rank])
