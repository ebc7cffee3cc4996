"""Callbacks about the model: device placement, best-model saving, EMA, SyncBN, checkpoints."""

from __future__ import annotations

import copy
import numbers
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from scramjet.callbacks.base import Event, TrainerCallback
from scramjet.callbacks.control import (
    check_metric_recorded,
    improved,
    is_last_update,
    is_resumed_run,
    metric_values_recorded,
    new_metric_value,
    warn_if_not_evaluated,
)
from scramjet.checkpoint import CheckpointManager, CheckpointWriteError, remote
from scramjet.checkpoint.resume import flush_checkpoints
from scramjet.runtime import distributed as dist
from scramjet.runtime.files import why_not_creatable, why_not_writable
from scramjet.runtime.preemption import PreemptionWatcher, TrainingPreempted

if TYPE_CHECKING:
    from scramjet.trainer import Trainer


def _check_save_path(trainer: Trainer, path: Path, who: str) -> None:
    """At a run's start: ``path`` (a file to write at a later save) can be created, or
    every rank raises now, before any training that a failed save would lose."""
    problem = None
    if trainer.is_main_process:
        problem = f"{str(path)!r} is a folder" if path.is_dir() else why_not_creatable(path)
    problem = dist.broadcast_object(problem)
    if problem is not None:
        raise CheckpointWriteError(
            f"{who} cannot write its save_path {str(path)!r}: {problem}. The run would train "
            f"until its first save and fail there, so it stops before the first step. Pass a "
            f"file path in a folder this process can write (e.g. save_path='runs/best.pt').",
            path,
        )


def check_ema_decay(decay: object) -> None:
    """An EMA's decay: a real number strictly between 0 and 1 (a string from a config file,
    a bool or NaN is refused here, not at the first comparison or update)."""
    number = isinstance(decay, numbers.Real) and not isinstance(decay, bool)
    if not (number and 0.0 < decay < 1.0):  # type: ignore[operator]
        raise ValueError(
            f"decay must be in (0, 1): a number strictly between 0 and 1 (the weight of the "
            f"average at each update); received {decay!r} ({type(decay).__name__}). Pass e.g. "
            f"decay=0.999, converting a value read from a file with float(...)."
        )


class MoveModulesToDeviceCallback(TrainerCallback):
    """Moves every ``nn.Module`` attribute of the trainer (e.g. a weighted loss) to its device.

    The model itself is placed by the Trainer; this covers the other modules a subclass
    or the loss function holds.
    """

    def _move(self, trainer: Trainer) -> None:
        for value in vars(trainer).values():
            if (
                isinstance(value, nn.Module)
                and value is not trainer.model
                and value is not trainer.unwrapped_model
            ):
                value.to(trainer.device)

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Move before training."""
        self._move(trainer)

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Move before a standalone evaluation too."""
        self._move(trainer)


class SaveBestModelCallback(TrainerCallback):
    """Saves a checkpoint whenever ``watch_metric`` improves; optionally reloads the best at the end.

    Only epochs that record a new value of the metric are compared; a NaN value is never
    the best. A run resumed from a checkpoint keeps the best value, so a worse epoch after
    the resume does not replace the saved file.

    It saves (and reloads) the trained weights. With ``ModelEmaCallback`` evaluating on the
    EMA weights, the metric describes the EMA weights, not the saved ones: keep the EMA
    weights of the best epoch with the ``ModelEmaCallback`` of
    ``scramjet.compat.pytorch_accelerated.callbacks``
    (it saves them when the metric improves), or evaluate without the EMA swap.

    Args:
        save_path: checkpoint file (written atomically, by the main process; checked
            when the run starts, so a path that cannot be written stops it at once).
        watch_metric: metric name in the run history.
        greater_is_better: whether larger values are better.
        reset_on_train: forget the best value at the start of each ``train()`` (not of a
            ``train(resume_from=...)`` that restored it).
        save_optimizer: include optimizer/scheduler state in the file.
        load_saved_checkpoint: restore the best weights when training ends (the weights
            only: the run history and counters keep the whole run).
    """

    def __init__(
        self,
        save_path: str | os.PathLike[str] = "best_model.pt",
        watch_metric: str = "eval_loss_epoch",
        greater_is_better: bool = False,
        reset_on_train: bool = True,
        save_optimizer: bool = True,
        load_saved_checkpoint: bool = True,
    ) -> None:
        self.save_path = Path(save_path)
        self.watch_metric = watch_metric
        self.greater_is_better = greater_is_better
        self.reset_on_train = reset_on_train
        self.save_optimizer = save_optimizer
        self.load_saved_checkpoint = load_saved_checkpoint
        self.best: float | None = None
        self.saved = False
        self._seen = 0  # values of the metric already compared

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Reset when asked (a resumed run keeps the restored best value)."""
        if self.reset_on_train and not is_resumed_run(trainer):
            self.best, self.saved = None, False
        self._seen = metric_values_recorded(trainer, self.watch_metric)
        warn_if_not_evaluated(trainer, self.watch_metric, type(self).__name__)
        _check_save_path(trainer, self.save_path, type(self).__name__)

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save when the watched metric has a new value that improved."""
        value, self._seen = new_metric_value(trainer, self.watch_metric, self._seen)
        if value is not None and improved(
            value, self.best, greater_is_better=self.greater_is_better
        ):
            self.best = value
            trainer.save_checkpoint(
                self.save_path,
                checkpoint_kwargs={self.watch_metric: value},
                save_optimizer=self.save_optimizer,
            )
            self.saved = True

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Reload the best weights if asked; a watched metric that the whole run never
        recorded is said in a warning."""
        check_metric_recorded(trainer, self.watch_metric, type(self).__name__)
        if self.load_saved_checkpoint and self.saved:
            # The weights only: the run's history, counters and callbacks stay as trained.
            trainer.load_checkpoint(self.save_path, load_optimizer=False, load_training_state=False)

    def state_dict(self) -> dict[str, Any]:
        """The best value seen."""
        return {"best": self.best, "saved": self.saved}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the best value (a run resumed from it keeps it)."""
        self.best, self.saved = state["best"], state["saved"]


class ModelEmaCallback(TrainerCallback):
    """Keeps an exponential moving average of the weights, updated after every optimizer step.

    ``ema = decay * ema + (1 - decay) * weights`` for parameters (buffers are copied).
    With ``evaluate_during_training`` the evaluations of ``train()`` run with the EMA
    weights; the trained weights are put back afterwards. ``evaluate()`` and ``predict()``
    after training use the model's own (trained) weights, so their numbers agree;
    ``ema_model`` holds the averaged copy (load it into the model to evaluate it).

    Args:
        decay: averaging factor per optimizer step.
        evaluate_during_training: evaluate with the EMA weights.
        save_path: if given, the EMA weights' state dict is saved there at the end (a
            local path is checked when the run starts).
    """

    def __init__(
        self,
        decay: float = 0.999,
        evaluate_during_training: bool = True,
        save_path: str | os.PathLike[str] | None = None,
    ) -> None:
        check_ema_decay(decay)
        self.decay = decay
        self.evaluate_during_training = evaluate_during_training
        from scramjet.checkpoint.remote import is_url

        self.save_path: str | Path | None = None
        if save_path is not None:  # a URL stays a string (Path would fold its "//")
            self.save_path = str(save_path) if is_url(save_path) else Path(save_path)
        self.ema_model: nn.Module | None = None
        self._pending_state: dict[str, Any] | None = None
        self._backup: dict[str, torch.Tensor] | None = None
        self._swapped: nn.Module | None = None  # the model holding the EMA weights now

    def _ensure(self, trainer: Trainer) -> nn.Module:
        from scramjet.runtime.fsdp import is_sharded

        if is_sharded(trainer.unwrapped_model):
            raise ValueError(
                "ModelEmaCallback received a model sharded with FSDP2 (shard_model / "
                "fully_shard); it needs an unsharded model, because its averaged copy and "
                "saved state would hold only this rank's shards. Train with DDP (do not call "
                "shard_model) to keep an EMA, or remove ModelEmaCallback."
            )
        if self.ema_model is None:
            self.ema_model = copy.deepcopy(trainer.unwrapped_model).eval()
            for p in self.ema_model.parameters():
                p.requires_grad_(False)
        if self._pending_state is not None:
            self.ema_model.load_state_dict(self._pending_state)
            self._pending_state = None
        return self.ema_model

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Create the EMA copy (or keep the restored one); check a local save path."""
        if isinstance(self.save_path, Path):
            _check_save_path(trainer, self.save_path, type(self).__name__)
        self._ensure(trainer).to(trainer.device)

    @torch.no_grad()
    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Fold the new weights into the average."""
        ema = self._ensure(trainer)
        model_params = [p for p in trainer.unwrapped_model.parameters()]
        ema_params = [p for p in ema.parameters()]
        floats = [(e, m) for e, m in zip(ema_params, model_params) if e.is_floating_point()]
        if floats:
            torch._foreach_lerp_(
                [e for e, _ in floats], [m.detach() for _, m in floats], 1.0 - self.decay
            )
        for eb, mb in zip(ema.buffers(), trainer.unwrapped_model.buffers()):
            eb.copy_(mb)

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Swap in the EMA weights for an evaluation inside ``train()``."""
        if self.evaluate_during_training and self.ema_model is not None and trainer.in_training_run:
            model = self._swapped = trainer.unwrapped_model
            self._backup = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.load_state_dict(self.ema_model.state_dict())

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Put the trained weights back."""
        if self._backup is not None:
            trainer.unwrapped_model.load_state_dict(self._backup)
            self._backup = self._swapped = None

    def close(self) -> None:
        """After a failed run: an evaluation that failed with the EMA weights swapped in
        leaves the model holding them; the trained weights go back."""
        backup, self._backup = self._backup, None
        model, self._swapped = self._swapped, None
        if backup is not None and model is not None:
            model.load_state_dict(backup)

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save the EMA weights if a path was given."""
        if self.save_path is not None and self.ema_model is not None and trainer.is_main_process:
            from scramjet.checkpoint import write_checkpoint
            from scramjet.checkpoint.remote import is_url, write_remote_checkpoint

            state, step = {"model": self.ema_model}, trainer.state.global_step
            if is_url(self.save_path):  # s3://, gs://, file://: staged, then uploaded
                write_remote_checkpoint(str(self.save_path), state, step=step)
            else:
                write_checkpoint(self.save_path, state, step=step)

    def state_dict(self) -> dict[str, Any]:
        """The EMA weights (empty before the first training run)."""
        if self.ema_model is None:  # restored but not applied yet: hand the restored state on
            return {"ema": dict(self._pending_state)} if self._pending_state is not None else {}
        return {"ema": {k: v.detach().cpu() for k, v in self.ema_model.state_dict().items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore EMA weights (applied when the run starts)."""
        if "ema" in state:
            if self.ema_model is not None:
                self.ema_model.load_state_dict(state["ema"])
            else:
                self._pending_state = state["ema"]


class ConvertSyncBatchNormCallback(TrainerCallback):
    """Turns BatchNorm layers into SyncBatchNorm when running on several processes.

    Must run before the model is wrapped for distributed training, so it acts at
    ``on_init_end`` (at once when added with ``trainer.add_callback``, before ``train()``).
    In a single process the model is left unchanged unless ``always``.
    """

    def __init__(self, always: bool = False) -> None:
        self.always = always
        self.converted = False

    def on_init_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Convert the model's BatchNorm layers (parameters are shared, not copied)."""
        if self.always or dist.get_world_size() > 1:
            if trainer.model is not trainer.unwrapped_model:
                raise RuntimeError(
                    f"ConvertSyncBatchNormCallback was added after the model was wrapped for "
                    f"distributed training ({type(trainer.model).__name__}); BatchNorm layers "
                    f"can only be converted before. Pass it in Trainer(callbacks=[...]), or add "
                    f"it before the first train()."
                )
            trainer.replace_model(nn.SyncBatchNorm.convert_sync_batchnorm(trainer.unwrapped_model))
            self.converted = True


class SaveTrainingStateCallback(TrainerCallback):
    """Saves the full training state for exact resume, every N epochs and/or N steps.

    Checkpoints go through :class:`~scramjet.checkpoint.CheckpointManager` (atomic,
    keep-k rotation that survives restarts). Resume with
    ``trainer.train(..., resume_from=directory)``, or ``resume_from="auto"``: the newest
    good checkpoint of this callback's folder, or a fresh start when it has none.

    With ``async_write`` (the default) a save copies the state and returns; the file is
    written, fsync-ed and renamed in a background thread while training goes on. The
    callback waits for the last write when training ends (every rank waits for the
    main process), so the files are on disk when ``train()`` returns; a failed write is
    raised then, or by the next save.

    ``directory`` may be a URL (``s3://bucket/run/checkpoints``, any fsspec URL): each
    checkpoint is written to ``local_dir`` by the background writer, then uploaded from
    it on the same thread (:class:`~scramjet.checkpoint.remote.RemoteCheckpointManager`).

    With ``save_on_preemption`` (the default), ``SIGTERM`` during training saves a
    checkpoint at the next optimizer step and ends ``train()`` with
    :class:`~scramjet.runtime.preemption.TrainingPreempted` (exit status 143). With
    several processes every rank stops at the same step, within about two seconds (or
    two steps): a one-element all-reduce about once a second, in the background; none in
    a single process. Writing the local copy of that checkpoint is always waited for (it
    is what the next run resumes from); for a URL ``directory`` its uploads, and those of
    earlier checkpoints still pending, get ``preemption_upload_seconds`` in all, so that
    the process exits before the ~30 s torch's elastic agent and Slurm allow after
    ``SIGTERM``. What is not uploaded by then stays in ``local_dir``, is named in a
    warning, and is uploaded by the next run on this machine (``resume_from="auto"``
    resumes from it).

    Args:
        directory: checkpoint directory, or a remote folder URL.
        every_n_steps: also save every N optimizer updates (mid-epoch).
        every_n_epochs: save at the end of every N-th epoch (None to disable).
        keep_last: how many recent checkpoints to keep.
        keep_best: also keep this many best checkpoints by ``monitor`` (on the store too,
            for a URL), so rotation never deletes the best one.
        monitor: the metric that ranks checkpoints for ``keep_best``, a name the run
            records (``eval_loss_epoch``, say); its value goes with each save of the
            weights it was measured on (a mid-epoch save has none: it is not ranked).
        mode: ``"min"`` if a lower ``monitor`` is better, ``"max"`` if higher is.
        async_write: write checkpoints in a background thread (False: inside the save).
        save_on_preemption: save and stop on ``SIGTERM`` (see above); or the signals to
            save and stop on, e.g. ``(signal.SIGTERM, signal.SIGUSR1)`` for Slurm's
            ``--signal=USR1@120``; False to turn it off.
        local_dir: for a URL ``directory``: the local folder of the copies (default: a
            folder under the system's temporary directory named after the URL).
        storage_options: for a URL ``directory``: passed to fsspec.
        preemption_upload_seconds: for a URL ``directory``: how long the save at
            preemption tries its uploads before the process exits (default
            :data:`~scramjet.checkpoint.remote.PREEMPTION_UPLOAD_SECONDS`, 10 s).
    """

    checkpoint_events = frozenset({Event.OPTIMIZER_STEP_END, Event.TRAINING_RUN_EPOCH_END})

    def __init__(
        self,
        directory: str | os.PathLike[str],
        every_n_steps: int | None = None,
        every_n_epochs: int | None = 1,
        keep_last: int | None = 3,
        async_write: bool = True,
        *,
        save_on_preemption: bool | Sequence[int] = True,
        local_dir: str | os.PathLike[str] | None = None,
        storage_options: dict[str, Any] | None = None,
        keep_best: int = 0,
        monitor: str | None = None,
        mode: str = "min",
        preemption_upload_seconds: float = remote.PREEMPTION_UPLOAD_SECONDS,
    ) -> None:
        for name, every in (("every_n_steps", every_n_steps), ("every_n_epochs", every_n_epochs)):
            if every is not None and (
                isinstance(every, bool) or not isinstance(every, int) or every < 1
            ):
                raise ValueError(
                    f"{name} must be a whole number ≥ 1, or None to turn it off; received "
                    f"{every!r}. For a save twice an epoch, say, pass every_n_steps=<updates "
                    f"per epoch // 2>."
                )
        if isinstance(keep_best, bool) or not isinstance(keep_best, int) or keep_best < 0:
            raise ValueError(f"keep_best must be a whole number ≥ 0; received {keep_best!r}.")
        if keep_best and not monitor:
            raise ValueError(
                f"keep_best={keep_best} needs monitor='<metric name>' (eval_loss_epoch, say) "
                f"to tell which checkpoints are best."
            )
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max'; received {mode!r}.")
        self.preemption_upload_seconds = remote.upload_seconds(
            preemption_upload_seconds,
            "preemption_upload_seconds must be",
            "well within the time the scheduler allows after SIGTERM (about 30 s for torchrun "
            "and Slurm)",
        )
        self.url = str(directory).rstrip("/") if remote.is_url(directory) else None
        if self.url is not None:
            self.directory = Path(local_dir or remote.default_local_dir(self.url))
        else:
            self.directory = Path(directory)
        self.every_n_steps = every_n_steps
        self.every_n_epochs = every_n_epochs
        self.keep_last = keep_last
        self.keep_best, self.monitor, self.mode = keep_best, monitor, mode
        self.async_write = async_write
        self.storage_options = storage_options
        self._manager: CheckpointManager | None = None
        if save_on_preemption is True:
            self._watcher: PreemptionWatcher | None = PreemptionWatcher()
        elif save_on_preemption is False:
            self._watcher = None
        else:  # the signals (one or several); PreemptionWatcher checks them
            signals: Sequence[int] = (
                (save_on_preemption,)
                if isinstance(save_on_preemption, int)
                else tuple(save_on_preemption)
            )
            self._watcher = PreemptionWatcher(signals)
        self._last_path: Path | None = None
        self._saved_step = 0  # the step of the last checkpoint (or of the one resumed from)
        self._reported = False  # the preemption warned about checkpoints not uploaded

    @property
    def checkpoint_location(self) -> str:
        """Where the checkpoints go: the URL, or the local directory."""
        return self.url or str(self.directory)

    @property
    def local_directory(self) -> Path:
        """The local folder of the checkpoint files (the copies, for a URL)."""
        return self.directory

    def _save(self, trainer: Trainer) -> None:
        self._open_manager(trainer)
        self._last_path = trainer.save_to_manager(self._manager)
        self._saved_step = trainer.state.global_step

    def _open_manager(self, trainer: Trainer, upload_limit: float | None = None) -> None:
        """Open the manager on the main process (``upload_limit``: a remote one gets that
        limit from the start, its first listing of the store included)."""
        if self._manager is None and trainer.is_main_process:
            options: dict[str, Any] = {"keep_last": self.keep_last, "async_write": self.async_write}
            if self.keep_best:
                options.update(keep_best=self.keep_best, monitor=self.monitor, mode=self.mode)
            if self.url is not None:
                self._manager = remote.RemoteCheckpointManager(
                    self.url,
                    self.directory,
                    storage_options=self.storage_options,
                    upload_limit=upload_limit,
                    **options,
                )
            else:
                self._manager = CheckpointManager(self.directory, **options)

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Check that the folder can be written (every rank raises alike), then install the
        preemption handler (main thread only; put back when training ends)."""
        problem = why_not_writable(self.directory) if trainer.is_main_process else None
        problem = dist.broadcast_object(problem)
        if problem is not None:
            copies = " (the local copies of the checkpoints)" if self.url is not None else ""
            raise CheckpointWriteError(
                f"SaveTrainingStateCallback cannot write into {str(self.directory)!r}"
                f"{copies}: {problem}. The run would train until its first save and lose "
                f"that work, so it stops before the first step. Pass a folder this process "
                f"can write (a read-only mount, another user's folder or a file in the way "
                f"cannot hold checkpoints); to resume from checkpoints in a read-only "
                f"folder, copy them into a writable one and pass that.",
                self.directory,
            )
        if isinstance(self._manager, remote.RemoteCheckpointManager):
            self._manager.limit_uploads(None)  # set at a preemption: the uploads wait again
        self._reported, self._saved_step = False, trainer.state.global_step
        if self._watcher is not None:
            self._watcher.install()

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save every N optimizer steps; save and stop if a rank was asked to stop."""
        saved = bool(self.every_n_steps and trainer.state.global_step % self.every_n_steps == 0)
        if saved and is_last_update(trainer) and self._saves_at_epoch_end(trainer):
            saved = False  # the same weights, saved after the evaluation with its metrics
        if saved:
            self._save(trainer)
        if self._watcher is not None and self._watcher.agreed(trainer.state.global_step):
            self._preempted(trainer, saved)

    def _saves_at_epoch_end(self, trainer: Trainer) -> bool:
        return bool(self.every_n_epochs and (trainer.state.epoch + 1) % self.every_n_epochs == 0)

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save every N epochs; save and stop if a rank was asked to stop."""
        saved = self._saves_at_epoch_end(trainer)
        if saved:
            self._save(trainer)
        config, state = trainer.run_config, trainer.state
        limit = config.max_num_train_steps
        last = state.epoch + 1 >= config.num_epochs or bool(limit and state.global_step >= limit)
        # After the last epoch the training is done: a signal now (during the final
        # evaluation, say) lets the run complete rather than requeue it (every rank alike).
        if not last and self._watcher is not None and self._watcher.agreed(state.global_step):
            self._preempted(trainer, saved)  # a signal during the evaluation, say

    def _preempted(self, trainer: Trainer, saved: bool) -> None:
        opened_before = self._manager is not None
        # A manager opened now lists the store: within the limit, like the uploads.
        self._open_manager(trainer, upload_limit=self.preemption_upload_seconds)
        uploads = (
            self._manager if isinstance(self._manager, remote.RemoteCheckpointManager) else None
        )
        if uploads is not None and opened_before:  # the local write is waited for; the
            uploads.limit_uploads(self.preemption_upload_seconds)  # uploads for a while
        try:
            if not saved:
                self._save(trainer)
            flush_checkpoints(self._manager)  # durable (and uploaded, if in time)
        except CheckpointWriteError as failure:
            if not failure.saved:
                raise
            warnings.warn(str(failure), RuntimeWarning, stacklevel=2)  # the local copy is whole
            self._reported = True  # close() after the run need not say it again
        watcher = self._watcher
        signal_name = (watcher.seen if watcher is not None else None) or "a signal"
        if watcher is not None:
            watcher.finish()
            watcher.restore()
        where = None if self._last_path is None else str(self._last_path)
        if self.url is not None and self._last_path is not None:
            uploaded = uploads is None or self._last_path.name not in uploads.not_uploaded
            where = f"{self.url}/{self._last_path.name}" if uploaded else str(self._last_path)
        error = TrainingPreempted(signal_name, trainer.state.global_step, where)
        trainer.print(f"scramjet: {error}")
        raise error

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Save a run ``stop_training()`` ended after the last save (a rerun with
        ``resume_from="auto"`` then keeps the stop); wait until the last checkpoint is
        durable (all ranks: the files exist after this)."""
        if self._watcher is not None:
            self._watcher.finish()
            self._watcher.restore()
        if trainer.state.stop_requested and trainer.state.global_step != self._saved_step:
            self._save(trainer)
        flush_checkpoints(self._manager)

    def close(self) -> None:
        """After a failed run: finish the write in flight and free its buffers."""
        if self._watcher is not None:
            self._watcher.restore()
        if self._manager is not None:
            try:
                self._manager.close()
            except CheckpointWriteError as failure:
                if not (failure.saved and self._reported):
                    raise
