"""What a Trainer saves and restores: its complete training state (exact resume).

A training checkpoint holds everything that decides what happens next: model,
optimizer, scheduler, GradScaler, the loop counters (``trainer.state``: optimizer step,
epoch, batches consumed in the epoch), the run history, the losses of the unfinished
epoch (``trainer.train_losses``), every callback's state (EMA weights, early-stopping
counters, ...), the data order's seed (``trainer.data_order``) and the RNG states of
every rank (Python, NumPy, torch CPU and CUDA) and the random state of the training
loader's collate function (its ``torch.Generator`` attributes, or its own ``state_dict``).
Each of those parts saves and restores itself (``state_dict`` / ``load_state_dict``); this
module only puts them together, from the Trainer's public attributes. Resuming rebuilds
the epoch's sampler order from the seed and skips the consumed indices, so no batch is
repeated or skipped and no skipped batch is loaded or run through the model.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from scramjet.checkpoint import remote
from scramjet.checkpoint._plan import run_plan, warn_if_data_changed, warn_if_replanned
from scramjet.checkpoint.manager import CheckpointManager, write_checkpoint
from scramjet.checkpoint.payload import _FIT_ADVICE, CheckpointMismatchError, is_stateful
from scramjet.checkpoint.records import load_training_object
from scramjet.runtime import distributed as dist
from scramjet.runtime import fsdp
from scramjet.runtime.seeding import get_rng_states, set_rng_states
from scramjet.runtime.stacklevel import user_stacklevel

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


def _epoch_losses(losses: Any, counts: Any) -> dict[str, Any]:
    """This rank's part of the unfinished epoch's losses and batch sizes.

    The epoch's loss is a sum over the ranks, so on another number of processes rank 0
    takes every saved rank's part and the other ranks none: each sample counts once.
    """
    per_rank = isinstance(losses, list) and bool(losses) and isinstance(losses[0], torch.Tensor)
    if not per_rank or len(losses) == dist.get_world_size():
        return {"losses": _this_rank(losses), "counts": _this_rank(counts)}
    if dist.get_rank() != 0:
        return {"losses": torch.zeros(0), "counts": []}
    joined = [part.reshape(-1) for part in losses]
    return {"losses": torch.cat(joined), "counts": [int(c) for part in counts for c in part]}


def _has_pending_gradients(trainer: Trainer) -> bool:
    """Whether gradients of an unfinished accumulation window are held (one device sync)."""
    grads = [p.grad for p in trainer.unwrapped_model.parameters() if p.grad is not None]
    grads = [g.to_local() if hasattr(g, "to_local") else g for g in grads]  # FSDP: own shard
    return bool(grads) and bool(torch.stack([g.detach().abs().sum() for g in grads]).sum() > 0)


AUTO = "auto"
"""``resume_from`` value: the newest good checkpoint of the run's folder, or a fresh start."""

# What a checkpoint holds besides weights and optimizer: the state of the run itself.
_TRAINING_STATE_KEYS = (
    "trainer_state",
    "run_history",
    "metric_steps",
    "epoch_losses",
    "epoch_loss_counts",
    "callbacks",
    "sampler_seed",
    "data_order",
    "rng",
    "collate_state",
    "run_plan",
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


def training_state(trainer: Trainer, *, include_optimizer: bool = True) -> dict[str, Any]:
    """Everything needed to resume, as entries for :class:`CheckpointManager` (collective).

    Every rank must call it: the per-rank parts (RNG states, the unfinished epoch's losses)
    are gathered so that each rank resumes with its own.
    """
    if trainer.in_training_run and _has_pending_gradients(trainer):
        warnings.warn(
            "Saving inside an accumulation window: the gradients accumulated so far are "
            "not saved, so resuming from this checkpoint is not exact. Save from "
            "on_optimizer_step_end or at the end of an epoch (as "
            "SaveTrainingStateCallback does).",
            stacklevel=4,
        )
    model = trainer.unwrapped_model
    state: dict[str, Any] = {"model": model}
    if include_optimizer:
        state["optimizer"] = trainer.optimizer
    if fsdp.is_sharded(model):  # FSDP: gather full state dicts (collective); rank 0 gets them
        optimizer = trainer.optimizer if include_optimizer else None
        model_sd, optim_sd = fsdp.full_state_dicts(model, optimizer)
        state["model"] = _Fixed(model_sd)
        if optim_sd is not None:
            state["optimizer"] = _Fixed(optim_sd)
    if include_optimizer:
        if trainer.scheduler is not None:
            state["scheduler"] = trainer.scheduler
        if trainer.scaler is not None:
            state["scaler"] = trainer.scaler
    state["trainer_state"] = trainer.state.state_dict()
    state["run_history"] = trainer.run_history.state_dict()
    # a run history of one's own (pytorch-accelerated allows one) may not record steps
    state["metric_steps"] = getattr(trainer.run_history, "measured_at", {})
    state["callbacks"] = {
        _callback_key(i, cb): cb.state_dict() for i, cb in enumerate(trainer.callbacks)
    }
    plan = run_plan(trainer) if trainer.has_run_config else None
    if plan is not None:  # a resume with another length is told about its scheduler
        state["run_plan"] = plan
    state["sampler_seed"] = trainer.data_order.state_dict()["seed"]
    # how the epoch was consumed (processes, batch size): a resume on another number of
    # processes skips exactly the samples this run saw
    state["data_order"] = trainer.data_order.resume_state()
    # The losses of the batches the saved counters count as consumed: none between epochs,
    # after the epoch's training part (its loss is recorded; a resume skips its batches)
    # or after train() returned, and not the batch in progress when a callback saves
    # inside a step (the resumed run trains it again).
    over = trainer.state.epoch_finished or trainer.state.train_done
    done = 0 if over else trainer.state.batches_seen_in_epoch
    losses = trainer.train_losses.state_dict() if done else {}
    local = {
        "rng": get_rng_states(),
        "collate": _collate_state(_train_collate(trainer)),
        "losses": losses.get("losses", torch.zeros(0))[:done],
        "counts": list(losses.get("counts", []))[:done],
    }
    per_rank = dist.gather_object(local)  # one collective; only rank 0 writes the file
    state["rng"] = [part["rng"] for part in per_rank]
    state["epoch_losses"] = [part["losses"] for part in per_rank]
    state["epoch_loss_counts"] = [part["counts"] for part in per_rank]
    collate = [part["collate"] for part in per_rank]
    if any(part is not None for part in collate):  # a collate function with random state
        state["collate_state"] = collate
    return state


def save_file(
    trainer: Trainer,
    path: str | os.PathLike[str],
    extra: dict[str, Any],
    include_optimizer: bool,
) -> None:
    """Write the training state (and ``extra`` plain values) to one file (collective).

    ``path`` is a local file or a URL (``s3://bucket/run/last.pt``, ``gs://``, ``file://``):
    :func:`~scramjet.checkpoint.remote.write_remote_checkpoint` uploads it atomically. A
    failed write is raised on the writing rank after the barrier, so the other ranks are
    never left waiting.
    """
    url = remote.is_url(path)
    if url:  # every rank, before the collective work: a typo fails at once, everywhere
        remote.check_scheme(str(path))
    state = training_state(trainer, include_optimizer=include_optimizer)
    state.update(extra)
    error: Exception | None = None
    if trainer.is_main_process:
        step, epoch = trainer.state.global_step, trainer.state.epoch
        try:
            if url:
                remote.write_remote_checkpoint(str(path), state, step=step, epoch=epoch)
            else:
                write_checkpoint(path, state, step=step, epoch=epoch)
        except Exception as exc:
            error = exc
    dist.barrier()
    if error is not None:
        raise error


def save_to_manager(trainer: Trainer, manager: CheckpointManager | None) -> Path | None:
    """Save the training state as ``manager``'s next checkpoint (collective; None: no writer)."""
    state = training_state(trainer)
    history, step = trainer.run_history, trainer.state.global_step
    # Only values measured on these weights: an evaluation of the epoch before would rank
    # a mid-epoch checkpoint (keep_best, which="best") by weights it does not hold.
    measured: dict[str, int] = getattr(history, "measured_at", {})
    metrics = {}
    for name in history.get_metric_names():
        value = history.get_latest_metric(name)
        if isinstance(value, int | float) and measured.get(name, step) == step:
            metrics[name] = float(value)
    path = None
    failure: BaseException | None = None
    if trainer.is_main_process and manager is not None:
        epoch = trainer.state.epoch + (1 if trainer.state.epoch_finished else 0)
        try:
            path = manager.save(state, step=trainer.state.global_step, epoch=epoch, metrics=metrics)
        except Exception as error:  # raised after the barrier: the other ranks must not wait
            failure = error
    dist.barrier()
    if failure is not None:
        raise failure
    return path


def restore(
    trainer: Trainer,
    path: str | os.PathLike[str],
    *,
    include_optimizer: bool = True,
    include_training_state: bool = True,
    check_plan: bool = False,
) -> dict[str, Any]:
    """Load a checkpoint into ``trainer``; returns its other plain values.

    With ``check_plan`` (``train(resume_from=...)``), a warning says when the run being
    resumed planned another number of updates than this one while its scheduler, built
    for that number, is restored.

    ``path`` is a checkpoint file, a folder of checkpoints (its newest good one), a URL
    of either (``s3://...``), or ``"auto"``: the newest good checkpoint in the folder of
    the trainer's checkpoint callback, or nothing (a fresh start, said in one line).
    """
    location: str | os.PathLike[str] = path
    local_dir: str | None = None
    if isinstance(path, str) and path == AUTO:
        found, local_dir = auto_location(trainer)
        if found is None:
            return {}
        location = found
    targets = _targets(trainer, include_optimizer)
    scaler = targets.pop("scaler", None)  # optional: a full-precision run saved none
    settings = _optimizer_settings(trainer.optimizer) if include_optimizer else None
    try:
        if remote.is_url(location):
            result = remote.load_remote(
                str(location),
                targets,
                local_dir=local_dir,
                storage_options=_storage_options(trainer, str(location)),
                include_local=_one_machine(),
            )
        else:
            manager, which = _manager_for(Path(location))
            result = manager.load(targets, which=which)
    except CheckpointMismatchError as error:  # advice the Trainer's caller can follow
        raise _with_trainer_advice(error) from error
    if settings is not None:
        _warn_if_settings_replaced(settings, _optimizer_settings(trainer.optimizer))
    values = dict(result.values)
    saved_scale = values.pop("scaler", None)
    if scaler is not None:
        _restore_scaler(trainer, scaler, saved_scale, str(location))
    if not include_training_state:
        for key in _TRAINING_STATE_KEYS:
            values.pop(key, None)
        return values
    plan = values.pop("run_plan", None)
    if check_plan and include_optimizer and "scheduler" in targets:
        warn_if_replanned(trainer, plan)
    trainer.state.load_state_dict(values.pop("trainer_state", {}))
    if check_plan:
        warn_if_data_changed(trainer, plan)
    if "run_history" in values:  # after the counters: its epoch follows trainer.state
        trainer.run_history.load_state_dict(values.pop("run_history"))
        steps = values.pop("metric_steps", {})
        if hasattr(trainer.run_history, "measured_at"):
            trainer.run_history.measured_at = steps
    trainer.train_losses.load_state_dict(
        _epoch_losses(values.pop("epoch_losses", []), values.pop("epoch_loss_counts", []))
    )
    _restore_callbacks(trainer, values.pop("callbacks", {}))
    if "data_order" in values:
        values.pop("sampler_seed", None)
        trainer.data_order.load_state_dict(values.pop("data_order"))
    elif "sampler_seed" in values:  # files written before the order recorded its processes
        trainer.data_order.load_state_dict({"seed": values.pop("sampler_seed")})
    _restore_rng(values.pop("rng", None))
    _restore_collate(trainer, values.pop("collate_state", None))
    if check_plan:  # train(resume_from=...): say where training goes on
        _say_where(trainer, str(location) if remote.is_url(location) else str(result.path))
    return values


def _say_where(trainer: Trainer, source: str) -> None:
    state = trainer.state
    where = (
        f"after the evaluation of epoch {state.epoch + 1}"
        if state.eval_done
        else f"after the training part of epoch {state.epoch + 1}"
        if state.train_done
        else f"{state.batches_seen_in_epoch} batches into epoch {state.epoch + 1}"
        if state.batches_seen_in_epoch
        else f"at the start of epoch {state.epoch + 1}"
    )
    trainer.print(f"Resumed from {source}: {where}, after {state.global_step} optimizer steps.")


_MISSING_ENTRY_ADVICE = "Pass strict=False to skip it."


def _with_trainer_advice(error: CheckpointMismatchError) -> CheckpointMismatchError:
    """``error`` with its advice rewritten for ``train(resume_from=...)`` and
    ``load_checkpoint()``, which take no ``strict``: the manager's advice to pass
    ``strict=False`` cannot be followed there."""
    text = str(error)
    if _FIT_ADVICE in text:  # the model changed since the checkpoint was written
        text = text.replace(
            _FIT_ADVICE,
            "The model differs from the one this checkpoint was saved from. To resume, "
            "build the model as it was then. To start a new run from the weights that "
            "still fit, load them with scramjet.checkpoint.CheckpointManager(<folder>)"
            ".load({'model': trainer.unwrapped_model}, which=<file>, strict=False) and "
            "call train() without resume_from.",
        )
    elif text.endswith(_MISSING_ENTRY_ADVICE):  # saved without a scheduler, say
        text = text[: -len(_MISSING_ENTRY_ADVICE)] + (
            "The run was saved without it: resume with the same setup, or start a new run "
            "from the saved weights with trainer.load_checkpoint(path, "
            "load_optimizer=False, load_training_state=False), then train() without "
            "resume_from."
        )
    else:
        return error
    return CheckpointMismatchError(text)


def _optimizer_settings(optimizer: Any) -> list[dict[str, Any]]:
    """Each parameter group's hyperparameters (``lr`` left out where a scheduler owns it)."""
    groups = getattr(optimizer, "param_groups", None) or []
    settings = []
    for group in groups:
        skip = {"params", "lr"} if "initial_lr" in group else {"params"}
        settings.append({k: v for k, v in group.items() if k not in skip})
    return settings


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return list(value) if isinstance(value, tuple | list) else value


def _warn_if_settings_replaced(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    """A warning naming the optimizer settings of this run that the checkpoint replaced
    (``lr=1e-3`` set for the resumed run, say: the saved run's value is used)."""
    changes = []
    for index, (mine, saved) in enumerate(zip(before, after, strict=False)):
        for key in sorted(mine.keys() & saved.keys()):
            if _plain(mine[key]) != _plain(saved[key]):
                changes.append(f"group {index} {key}: {mine[key]!r} -> {saved[key]!r}")
    if changes:
        warnings.warn(
            f"The checkpoint's optimizer settings replace the ones this run's optimizer was "
            f"created with ({'; '.join(changes)}): a resume continues the saved run as it "
            f"was. To go on with the new values, set them in optimizer.param_groups from a "
            f"callback's on_training_run_start (it runs after the restore), or start a new "
            f"run from the weights: trainer.load_checkpoint(path, load_optimizer=False, "
            f"load_training_state=False), then train() without resume_from.",
            stacklevel=4,
        )


def _restore_scaler(trainer: Trainer, scaler: Any, saved: Any, location: str) -> None:
    """The loss scale of an fp16 checkpoint, or a fresh one for a checkpoint saved in full
    precision or bf16 (switching a run to fp16 when resuming it)."""
    if not saved:  # none, or a disabled GradScaler's empty state
        trainer.print(
            f"{location}: the checkpoint holds no loss scale (saved without fp16); the "
            f"GradScaler starts fresh at {scaler.get_scale():g}"
        )
        return
    load_training_object("scaler", scaler, saved, True, Path(location))


def _targets(trainer: Trainer, include_optimizer: bool) -> dict[str, Any]:
    model = trainer.unwrapped_model
    targets: dict[str, Any] = {"model": model}
    if include_optimizer:
        targets["optimizer"] = trainer.optimizer
        if trainer.scheduler is not None:
            targets["scheduler"] = trainer.scheduler
        if trainer.scaler is not None:
            targets["scaler"] = trainer.scaler
    if fsdp.is_sharded(model):  # FSDP: every rank reads the full state and keeps its shard
        targets["model"] = _FullStateTarget(model)
        if include_optimizer:
            targets["optimizer"] = _FullStateTarget(model, trainer.optimizer)
    return targets


def auto_location(trainer: Trainer) -> tuple[str | None, str | None]:
    """Where ``resume_from="auto"`` resumes from: ``(folder or URL, local folder)``.

    The folder is the ``checkpoint_location`` of the first callback that has one
    (:class:`~scramjet.callbacks.SaveTrainingStateCallback`); ``(None, None)`` when it
    holds no checkpoint yet. The main process decides and tells the others (collective),
    so every rank resumes, or starts fresh, alike.
    """
    owners = _owners(trainer)
    if not owners:
        raise ValueError(
            "resume_from='auto' resumes from the checkpoint folder of a "
            "SaveTrainingStateCallback, and this trainer has none (callbacks: "
            f"{[type(cb).__name__ for cb in trainer.callbacks]}). Add "
            "SaveTrainingStateCallback(folder_or_url, ...) to the callbacks, or pass "
            "resume_from=<checkpoint file, folder or URL>. With tracking.Experiment, pass "
            "Experiment(..., resume='auto') instead and leave resume_from unset."
        )
    location = str(getattr(owners[0], "checkpoint_location"))  # noqa: B009 (duck-typed)
    local = getattr(owners[0], "local_directory", None)
    found: bool | None = None
    failure: Exception | None = None
    if dist.is_main_process():
        try:
            found = remote.has_checkpoints(location, _storage_options(trainer, location))
        except Exception as error:  # an unreachable store: never "no checkpoint, start fresh"
            failure = error
        if not found and failure is None and remote.is_url(location) and _one_machine():
            # copies saved here whose upload never succeeded (load_remote prefers them)
            folder = local or remote.default_local_dir(location)
            found = remote.has_checkpoints(folder)
    problem = None if failure is None else f"{type(failure).__name__}: {failure}"
    found, problem = dist.broadcast_object((found, problem))  # every rank raises alike
    if problem is not None:
        raise RuntimeError(
            f"resume_from='auto' could not look for checkpoints in {location} ({problem}). "
            f"Starting fresh would train from step 0 and rotate the saved checkpoints away, "
            f"so the run stops instead: check that the store is reachable (endpoint, "
            f"credentials, network) and run the same command again, or pass resume_from=<a "
            f"checkpoint file or folder you have>."
        ) from failure
    if not found:
        trainer.print(f"resume_from='auto': no checkpoint in {location}; starting fresh")
        return None, None
    if not remote.is_url(location) and dist.get_world_size() > 1:
        _check_every_rank_sees(location)
    trainer.print(f"resume_from='auto': resuming from the newest good checkpoint in {location}")
    return location, None if local is None else str(local)


def _owners(trainer: Trainer) -> list[Any]:
    """The callbacks that own a checkpoint folder (``SaveTrainingStateCallback``), in order."""
    return [cb for cb in trainer.callbacks if getattr(cb, "checkpoint_location", None)]


def _storage_options(trainer: Trainer, url: str) -> dict[str, Any] | None:
    """The fsspec options (credentials, endpoint) of the callback that saves to ``url``."""
    for owner in _owners(trainer):
        if str(owner.checkpoint_location).rstrip("/") == url.rstrip("/"):
            options = getattr(owner, "storage_options", None)
            return dict(options) if options else None
    return None


def _check_every_rank_sees(folder: str) -> None:
    """Every rank loads the checkpoint the main process found: a folder on one machine's
    own disk is an error on every rank, naming the ranks that cannot see it (collective)."""
    sees = dist.gather_object((folder, remote.has_checkpoints(folder)))
    blind = [rank for rank, (_, seen) in enumerate(sees) if not seen]
    if blind:
        ranks = ", ".join(
            f"rank {rank}" + ("" if sees[rank][0] == sees[0][0] else f" (in {sees[rank][0]!r})")
            for rank in blind
        )
        raise FileNotFoundError(
            f"resume_from='auto': rank 0 found checkpoints in {sees[0][0]!r}, but {ranks} "
            f"cannot see them (a folder on one machine's own disk). Every rank loads the "
            f"checkpoint, so the folder must be visible from every machine: put it on a "
            f"shared file system, or give SaveTrainingStateCallback a URL (s3://..., gs://...)."
        )


def flush_checkpoints(manager: CheckpointManager | None) -> None:
    """Finish ``manager``'s background write, then let every rank pass (collective).

    Call it on every rank; ``manager`` is None where nothing is written. The snapshot
    buffers are freed. A failed write is raised on the writing rank after the barrier,
    so the other ranks are never left waiting.

    Args:
        manager: This rank's checkpoint manager, or None.
    """
    error: Exception | None = None
    if manager is not None:
        try:
            manager.close()
        except Exception as exc:
            error = exc
    dist.barrier()
    if error is not None:
        raise error


def _one_machine() -> bool:
    """Whether every process runs on this machine (and so sees the same local folder)."""
    return dist.get_world_size() == dist.read_env().local_world_size


def _manager_for(path: Path) -> tuple[CheckpointManager, str | Path]:
    if path.is_dir():
        manager = CheckpointManager(path, keep_last=None)
        if manager.latest_path is None:
            inside = sorted(p.name for p in path.iterdir())
            raise FileNotFoundError(
                f"no checkpoint in the folder {str(path)!r} (it holds "
                f"{inside[:5] or 'nothing'}{', ...' if len(inside) > 5 else ''}): resume_from= "
                f"and load_checkpoint() take a checkpoint file (trainer.save_checkpoint) or a "
                f"folder of ckpt-<seq>-step<step>.pt files (SaveTrainingStateCallback, a run "
                f"folder's checkpoints/). Pass one of those, or resume_from='auto' to start "
                f"fresh when there is none (with a SaveTrainingStateCallback), or leave it unset."
            )
        return manager, "latest"
    if path.is_file():
        return CheckpointManager(path.parent, keep_last=None), path
    raise FileNotFoundError(
        f"checkpoint {str(path)!r} does not exist. resume_from= and load_checkpoint() take "
        f"a checkpoint file written by trainer.save_checkpoint, a directory written by "
        f"SaveTrainingStateCallback or CheckpointManager, or a URL of either (s3://...); "
        f"resume_from= also takes 'auto' (the newest checkpoint of the "
        f"SaveTrainingStateCallback folder, or a fresh start)."
    )


def _restore_callbacks(trainer: Trainer, saved: dict[str, Any]) -> None:
    for i, cb in enumerate(trainer.callbacks):
        key = _callback_key(i, cb)
        if key in saved:
            cb.load_state_dict(saved[key])
        elif cb.state_dict():
            warnings.warn(
                f"The checkpoint holds no state for callback {key}; it starts fresh.",
                stacklevel=4,
            )


def _restore_rng(per_rank: list[dict[str, Any]] | None) -> None:
    if not per_rank:
        return
    rank, world = dist.get_rank(), dist.get_world_size()
    if len(per_rank) != world and rank == 0:  # said once, not by every rank
        warnings.warn(
            f"The checkpoint was saved by {len(per_rank)} process(es) and is resumed by "
            f"{world}; every rank takes rank 0's RNG state, so randomness differs from "
            f"an uninterrupted run.",
            stacklevel=4,
        )
    if len(per_rank) != world:
        rank = 0
    set_rng_states(per_rank[rank])


# ------------------------------------------------------------ the collate function


def _train_collate(trainer: Trainer) -> Any:
    """The collate function of the training loader (the one ``train(collate_fn=...)``
    gave, or a DataLoader's own); None before ``train()`` or for a loader without one."""
    return getattr(trainer.train_dataloader, "collate_fn", None)


def _describe(collate: Any) -> str:
    return "none" if collate is None else type(collate).__qualname__


def _collate_state(collate: Any) -> dict[str, Any] | None:
    """What decides the next random draws of ``collate``: its ``state_dict()`` when it has
    ``state_dict``/``load_state_dict``, else the states of its ``torch.Generator``
    attributes (``DataCollatorForLanguageModeling(seed=...)``'s ``generator``); None for
    a collate function without either."""
    if collate is None:
        return None
    if is_stateful(collate):
        return {"type": _describe(collate), "state_dict": collate.state_dict()}
    attributes = getattr(collate, "__dict__", None) or {}
    generators = {
        name: {"state": value.get_state(), "device": str(value.device)}
        for name, value in attributes.items()
        if isinstance(value, torch.Generator)
    }
    return {"type": _describe(collate), "generators": generators} if generators else None


def _restore_collate(trainer: Trainer, per_rank: Any) -> None:
    """Put the saved random state of the collate function back into this run's one.

    A checkpoint without it (older files, a stateless collate function) leaves the collate
    function as it is; a collate function with a ``state_dict`` is then said to start
    fresh. Outside a run (no training loader yet) there is nothing to restore into.
    """
    collate = _train_collate(trainer)
    saved = None
    if isinstance(per_rank, list) and per_rank:
        rank = dist.get_rank() if len(per_rank) == dist.get_world_size() else 0
        saved = per_rank[rank]
    if not isinstance(saved, dict):
        if is_stateful(collate):
            warnings.warn(
                f"The checkpoint holds no state for the collate function "
                f"({_describe(collate)}); it starts fresh.",
                stacklevel=user_stacklevel(),
            )
        return
    if trainer.train_dataloader is None:
        return
    problem = _load_collate(collate, saved)
    if problem is not None:
        warnings.warn(
            f"The checkpoint holds the random state of the collate function "
            f"{saved.get('type')} ({_saved_kind(saved)}), but {problem}: it starts fresh, "
            f"so its random draws (masking, augmentation) differ from "
            f"the uninterrupted run's. To resume exactly, pass the collate function the run "
            f"was saved with (train(collate_fn=...) or your DataLoader's collate_fn).",
            stacklevel=user_stacklevel(),
        )


def _saved_kind(saved: dict[str, Any]) -> str:
    if "state_dict" in saved:
        return "its state_dict()"
    names = ", ".join(repr(name) for name in saved.get("generators", {}))
    return f"torch.Generator attribute(s) {names}"


def _load_collate(collate: Any, saved: dict[str, Any]) -> str | None:
    """Load ``saved`` into ``collate``; a description of why it does not fit, or None."""
    mine = f"this run's collate function ({_describe(collate)})"
    if "state_dict" in saved:
        if not is_stateful(collate):
            return f"{mine} has no state_dict()/load_state_dict()"
        try:
            collate.load_state_dict(saved["state_dict"])
        except Exception as error:
            raise CheckpointMismatchError(
                f"{mine}.load_state_dict() refused the state saved from "
                f"{saved.get('type')} ({type(error).__name__}: {error}). Resume with the "
                f"collate function the run was saved with, or start a new run from the "
                f"weights: trainer.load_checkpoint(path, load_optimizer=False, "
                f"load_training_state=False), then train() without resume_from."
            ) from error
        return None
    loaded: dict[str, torch.Generator] = {}
    for name, entry in dict(saved.get("generators", {})).items():
        current = getattr(collate, name, 0)  # None: a generator created on first use
        if current is not None and not isinstance(current, torch.Generator):
            return f"{mine} has no torch.Generator attribute {name!r}"
        try:
            generator = torch.Generator(device=entry["device"])
            generator.set_state(entry["state"])
        except (RuntimeError, TypeError, KeyError) as error:
            return f"its generator {name!r} cannot be restored here ({error})"
        loaded[name] = generator
    for name, generator in loaded.items():
        current = getattr(collate, name)
        if isinstance(current, torch.Generator) and current.device == generator.device:
            current.set_state(generator.get_state())  # the same object: shared references see it
        else:
            setattr(collate, name, generator)
    if loaded and hasattr(collate, "_generator_pid"):
        # transformers' collators recreate their generator from the seed in a process
        # other than the one that made it: this one now owns the restored generator.
        collate._generator_pid = os.getpid()
    return None


__all__ = [
    "AUTO",
    "auto_location",
    "flush_checkpoints",
    "restore",
    "save_file",
    "save_to_manager",
    "training_state",
]
