"""``Experiment``: a Trainer callback that keeps one tracked run folder per run.

Layout of ``<root>/<project>/<experiment>_<YYYYmmdd-HHMMSS>_<id>/``::

    run.json            status (running, finished, failed, interrupted, upload-failed),
                        start/end times, duration, last step, remote folder
    hyperparams.json    your hyperparameters + the trainer's run settings
    environment.json    package versions, git commit, command line, seed, devices
    metrics.csv         one line per value: scope (step|epoch), epoch, step, time, name, value
                        (the same names every logger receives: train_loss, lr, the
                        trainer.log names, train_loss_epoch, eval_loss_epoch)
    metrics.jsonl       one JSON object per logged row
    checkpoints/        full training states (CheckpointManager): train(resume_from=...)
    model/              final weights: model.pt (+ model.safetensors)
    results/            result-package outputs as JSON (and predictions if given)
    plots/              loss.png and one PNG per metric
    report.html         self-contained report (plots embedded)
    code/               a copy of the launching script
    manifest.json       with storage=: every file's size, SHA-256 and remote check

Resuming continues the same folder: either ``trainer.train(..., resume_from=<run>/checkpoints)``
(the checkpoint carries the run folder in this callback's state) or
``Experiment(..., resume=<run folder> | "latest")``, which restores the latest checkpoint
itself when ``train()`` was not given ``resume_from``. Metric rows logged after the
restored checkpoint are dropped, so the history reads as one uninterrupted run.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import torch

from scramjet.callbacks.base import Event, TrainerCallback
from scramjet.callbacks.control import is_last_update
from scramjet.checkpoint import CheckpointInfo, CheckpointManager
from scramjet.checkpoint.resume import flush_checkpoints
from scramjet.runtime import distributed as dist
from scramjet.runtime import fsdp
from scramjet.runtime.preemption import TrainingPreempted
from scramjet.tracking import _evaluation, _files
from scramjet.tracking._failure import earlier_failure, record_traceback, stop_failure
from scramjet.tracking._interrupts import keep_ctrl_c, raise_lost_ctrl_c
from scramjet.tracking._mirror import RunMirror
from scramjet.tracking._params import (
    check_options,
    declared_hyperparams,
    plain_hyperparams,
    plain_results,
    result_numbers,
    results_mapping,
    run_hyperparams,
    source_tags,
    tracker_params,
)
from scramjet.tracking._run_folder import RunFolder
from scramjet.tracking._steps import StepBuffer, StepLosses
from scramjet.tracking._writer import TrackerWriter, dispatch, record_tracker_errors
from scramjet.tracking.loggers import open_tracker
from scramjet.tracking.loggers.base import MetricRow, Tracker
from scramjet.tracking.loggers.csv import CSVTracker
from scramjet.tracking.metric_log import MetricLog
from scramjet.tracking.storage import (
    RunStorage,
    StorageTimeouts,
    UploadReport,
)
from scramjet.tracking.upload_process import ProcessRunStorage

if TYPE_CHECKING:
    from scramjet.trainer import Trainer
    from scramjet.trainer.state import RunHistory


class Experiment(RunMirror, RunFolder, TrainerCallback):
    """Tracks a training run in its own folder: metrics, checkpoints, weights, plots, report.

    Args:
        project: project name (a folder under ``root``).
        experiment: experiment name (prefix of the run folder).
        root: where runs live; created if missing.
        hyperparams: your hyperparameters, saved and reported as they are now (later
            changes to the dict are not recorded): a dict, or a settings object (a
            dataclass, an ``argparse.Namespace``, a Hugging Face ``PretrainedConfig`` or
            anything with ``to_dict()``). Values become JSON: dataclasses dicts
            of their fields, one-element tensors and NumPy scalars numbers, small tensors
            and arrays lists, paths strings, keys strings; others their ``str``.
        storage: optional fsspec URL (``s3://bucket/prefix``, ``gs://...``); the run is
            mirrored to ``<storage>/<project>/<run folder name>/`` in the background.
        storage_options: passed to fsspec (credentials come from the usual AWS/GCP config).
        upload_process: run the uploads in a separate process (True), in threads of the
            training process (False), or None: a process for remote URLs, threads for
            ``file://``. A process keeps upload work (signing, parsing, hashing) from
            competing with the loop for Python's GIL; it is started with the run, before
            training, and inherits the environment (``AWS_*`` variables).
        loggers: extra trackers: ``"tensorboard"``, ``"mlflow"``, ``"wandb"`` or
            :class:`Tracker` instances. CSV/JSONL files are always written (the report
            reads them). Every logger receives the same metric names.
        checkpoint: ``"epoch"``, ``"end"``, an int N (every N optimizer steps) or None.
            Checkpoints are full training states (resume with ``train(resume_from=...)``).
        keep_best: best checkpoints kept by ``monitor`` (besides the ``keep_last`` newest).
        monitor: metric that ranks checkpoints.
        mode: ``"min"`` or ``"max"`` for ``monitor``.
        keep_last: newest checkpoints kept.
        resume: a run folder to continue, or ``"latest"`` (or ``"auto"``) for the newest
            run of ``project/experiment`` (a new run when there is none).
        log_every_n_steps: per-step values (training loss, learning rate and what
            ``trainer.log`` received) are read from the device once every N optimizer
            steps (one sync per N steps); each row keeps its step's wall time. The
            metric files are appended by a background thread at most once a second and
            at each epoch end.
        on_complete: called with the :class:`UploadReport` (or None without storage) once
            the run is finished and every upload is verified; never called if one failed.
        save_script: copy the launching script into ``code/``.
        upload_attempts: tries per background upload (exponential backoff from 0.5 s,
            capped at 10 s); files still missing are retried by the final sync.
        sync_every_s: files written during training (checkpoints, metric files, the
            run's JSON files) are mirrored in one batch at most this often, the first
            batch ``sync_every_s`` after training started; 0 mirrors every epoch. Upload
            work shares the CPU with the loop (and the GIL, with ``upload_process=False``),
            so short epochs should not each trigger one. Everything is synced and verified at the end.
        async_checkpoint: checkpoints are copied on the loop and written (fsync, rename,
            rotation) by a background thread; they are durable when ``train()`` returns.
        upload_timeouts: bounds on every wait for the remote (connect, read, per call,
            ``check``: the check at the start, and ``final``: the end-of-run sync returns
            within it); see :class:`~scramjet.tracking.storage.StorageTimeouts`.
        on_storage_error: what happens when the check at the start (credentials, bucket,
            a test write, within ``upload_timeouts.check`` seconds) finds that ``storage``
            cannot be written: ``"raise"`` (one error naming the cause, before training)
            or ``"local"`` (one warning; the run is kept in local files only and
            ``run.json`` records ``storage_error``). ``"continue"`` skips the check: uploads
            are tried through the run (a remote that comes back receives the files) and a
            failure is reported at the end (status ``upload-failed``).

    Example:
        >>> from scramjet.tracking import Experiment
        >>> exp = Experiment("demo", "mlp", root="runs", hyperparams={"lr": 0.1})  # doctest: +SKIP
        >>> Trainer(model, loss, opt, callbacks=[exp]).train(data, 3)  # doctest: +SKIP
    """

    checkpoint_events = frozenset({Event.OPTIMIZER_STEP_END, Event.TRAINING_RUN_EPOCH_END})

    def __init__(
        self,
        project: str,
        experiment: str,
        *,
        root: str | os.PathLike[str] = "runs",
        hyperparams: Mapping[str, Any] | Any = None,
        storage: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        loggers: Iterable[str | Tracker] = ("csv",),
        checkpoint: str | int | None = "epoch",
        keep_best: int = 2,
        monitor: str = "eval_loss_epoch",
        mode: str = "min",
        keep_last: int = 1,
        resume: str | os.PathLike[str] | None = None,
        log_every_n_steps: int = 50,
        on_complete: Callable[[UploadReport | None], Any] | None = None,
        save_script: bool = True,
        upload_attempts: int = 6,
        sync_every_s: float = 60.0,
        async_checkpoint: bool = True,
        upload_process: bool | None = None,
        upload_timeouts: StorageTimeouts | None = None,
        on_storage_error: str = "raise",
    ) -> None:
        self.on_storage_error = on_storage_error
        self.project = _files.check_name(project, "project", "project")
        self.experiment = _files.check_name(experiment, "experiment", "experiment")
        self.root = Path(root)
        self.hyperparams = plain_hyperparams({} if hyperparams is None else hyperparams)
        self.storage_url = storage
        self.storage_options = dict(storage_options or {})
        self.logger_specs = list(loggers)
        check_options(checkpoint, mode, log_every_n_steps, on_storage_error)
        self.checkpoint = checkpoint
        self.keep_best, self.monitor = keep_best, monitor
        self.mode, self.keep_last = mode, keep_last
        self.resume = resume
        self.log_every_n_steps = log_every_n_steps
        self.on_complete = on_complete
        self.save_script = save_script
        self.upload_attempts = upload_attempts
        self.sync_every_s = sync_every_s
        self.async_checkpoint = async_checkpoint
        self.upload_process = upload_process
        self.upload_timeouts = upload_timeouts or StorageTimeouts()
        self._deferred: set[str] = set()
        self._defer_lock = threading.Lock()
        self._last_sync = -math.inf
        self.upload_report: UploadReport | None = None
        self._run_dir: Path | None = None
        self._opened_at = 0.0  # when start() opened the run folder
        self._reopened = False
        self._restored_dir: Path | None = None
        self._storage: RunStorage | ProcessRunStorage | None = None
        self._writer: TrackerWriter | None = None
        self._manager: CheckpointManager | None = None
        self._steps = StepBuffer()
        self._losses = StepLosses()  # every rank: a step's loss is the global batch's
        self._trackers: list[Tracker] = []  # kept after the run: results logged later
        self._tracker_errors: list[str] = []
        self._metric_log: MetricLog | None = None
        self._last_step = 0  # the step results logged now are recorded at
        self._eval_before: dict[str, int] = {}  # metric counts as a standalone evaluate() began
        self._state: Any = None  # the trainer's counters: run.json's last step after a crash
        self._history: RunHistory | None = None
        self._seen: dict[str, int] = {}
        self._last_ckpt_step = -1
        self._finished = False
        self._trained = False  # a train() used this Experiment already
        self._previous_run: Path | None = None
        self._kept_json: dict[str, str] = {}  # the run's JSON files, last written
        self._mid_epoch = False  # between a training epoch's start and end events
        self._syncing = False  # the storage is being synced and checked
        self._start_step = 0  # the step this train() started (or resumed) at
        self._earlier_failure: dict[str, Any] | None = None  # a continued run had failed

    # ----------------------------------------------------------------- folder
    @property
    def run_dir(self) -> Path:
        """The run folder (known once training started or :meth:`start` was called)."""
        if self._run_dir is None:
            raise RuntimeError(
                "The run folder is created when training starts; call start() first."
            )
        return self._run_dir

    @property
    def checkpoint_dir(self) -> Path:
        """``<run>/checkpoints``: pass it to ``train(resume_from=...)``."""
        return self.run_dir / "checkpoints"

    @property
    def remote_url(self) -> str | None:
        """Remote folder of the run when ``storage`` is set."""
        if self.storage_url is None or self._run_dir is None:
            return None
        return f"{self.storage_url.rstrip('/')}/{self.project}/{self._run_dir.name}"

    def _choose_dir(self) -> tuple[Path, bool]:
        if self._restored_dir is not None:
            return self._not_in_use(self._restored_dir), True
        if self.resume is not None:
            if str(self.resume) in ("latest", "auto"):
                found = _files.latest_run(self.root, self.project, self.experiment)
                if found is not None:
                    return self._not_in_use(found), True
            else:
                path = Path(self.resume)
                if str(self.resume) == "" or not _files.is_run_folder(path):
                    raise FileNotFoundError(self._not_a_run_message(path))
                return self._not_in_use(path), True
        return _files.create_run_dir(self.root, self.project, self.experiment), False

    def _not_a_run_message(self, path: Path) -> str:
        return _files.not_a_run_message(
            str(self.resume), path, self.root, self.project, self.experiment
        )

    @staticmethod
    def _not_in_use(path: Path) -> Path:
        """``path``, unless another live process on this host is training in it."""
        pid = _files.live_owner(path)
        if pid is not None:
            raise RuntimeError(_files.in_use_message(path, pid))
        return path

    def start(self) -> Path:
        """Create (or reopen) the run folder; collective in a distributed run.

        Raises:
            FileNotFoundError: ``resume`` names a folder that is not a run folder.
            RuntimeError: the folder to continue is in use by another live process on
                this host (its ``run.json`` says ``running``).
        """
        if self._run_dir is not None:
            return self._run_dir
        chosen: tuple[str, bool] | Exception | None = None
        if dist.is_main_process():
            try:
                path, resumed = self._choose_dir()
                chosen = (str(path), resumed)
            except (OSError, RuntimeError) as exc:  # raised on every rank, not only here
                chosen = exc
        chosen = dist.broadcast_object(chosen)
        if isinstance(chosen, Exception):
            raise chosen
        assert chosen is not None
        self._run_dir = Path(chosen[0]).resolve()
        self._reopened = chosen[1]
        self._opened_at = time.time()
        if dist.is_main_process():
            self._record_hyperparams()
        return self._run_dir

    def _record_hyperparams(self) -> None:
        """A new folder's ``hyperparams.json`` with the declared values, for a run that never
        trains (an evaluation whose results are logged); ``train()`` rewrites it in full."""
        path = self.run_dir / "hyperparams.json"
        if not path.exists():
            run = (self.project, self.experiment, self.run_dir.name)
            text = _files.write_json(path, declared_hyperparams(*run, self.hyperparams))
            self._kept_json["hyperparams.json"] = text  # written back if the folder goes

    def _open(self, resumed: bool) -> None:
        run = self.run_dir
        written = _files.last_written(run)  # before a logger rewrites run.json
        storage_error = self._open_storage_checked()
        trackers: list[Tracker] = [CSVTracker(run)]
        try:
            trackers += [self._make_tracker(s) for s in self.logger_specs if s != "csv"]
        except Exception as error:  # a logger that cannot start: the folder says why
            _files.record_end(run, "failed", error, **self._run_fields())
            self._upload("run.json")
            raise
        self._trackers, self._tracker_errors = trackers, []
        self._writer = TrackerWriter(trackers, self._upload_metric_files)
        info = _files.read_json(run / "run.json")  # may already hold the MLflow run id
        self._earlier_failure = earlier_failure(info) if resumed else None
        _files.begin_session(info, run, resumed, written)
        stale = ("error", "traceback", "upload_error", "storage_error", "finished", "ended")
        for key in (*stale, "duration"):
            info.pop(key, None)
        if storage_error:
            info["storage_error"] = storage_error
        info.setdefault("started", time.time())
        info.update(status="running", **self._run_fields())
        if self._previous_run is not None:
            info["previous_run"] = self._previous_run.name
        self._write_json("run.json", info, periodic=True)

    def _run_fields(self) -> dict[str, Any]:
        """What ``run.json`` says of the run and of the process writing it (with the host,
        ``scramjet runs`` shows a run whose process vanished as crashed)."""
        return {
            "project": self.project,
            "experiment": self.experiment,
            "remote": self.remote_url,
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }

    def _make_tracker(self, spec: str | Tracker) -> Tracker:
        if isinstance(spec, Tracker):
            return spec
        info = _files.read_json(self.run_dir / "run.json")
        tags = {**source_tags(), "scramjet.run_dir": str(self.run_dir)}
        tracker, ids = open_tracker(spec, self.run_dir, self.project, info, tags)
        if ids:  # the MLflow or W&B run id: a resume continues that run
            self._write_json("run.json", {**info, **ids})
        return tracker

    # ----------------------------------------------------------------- events
    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Open the run folder, restore a resumed run, write hyperparameters and environment."""
        self._last_sync = time.monotonic()  # the first batch of uploads: sync_every_s from now
        fresh = trainer.state.global_step == 0 and trainer.state.epoch == 0
        if fresh and (self._trained or (self._finished and self.resume is None)):  # eval-only
            self._next_run(trainer)
        self._trained = True
        self.start()
        if trainer.is_main_process and self._writer is None:
            self._open(self._reopened or (self.run_dir / "run.json").exists())
        if self.resume is not None and trainer.state.global_step == 0 and trainer.state.epoch == 0:
            self._self_restore(trainer)
        resumed = trainer.state.global_step > 0 or trainer.state.epoch > 0
        self._start_step = trainer.state.global_step
        self._seen = {
            n: len(trainer.run_history.get_metric_values(n))
            for n in trainer.run_history.get_metric_names()
        }
        self._steps.clear()
        self._losses.clear()
        self._history = trainer.run_history  # its epoch labels the rows close() flushes
        self._state = trainer.state
        self._metric_log = trainer.metric_log  # every rank: a reduce= log is collective
        self._metric_log.subscribe(self._on_step_values)
        self._last_ckpt_step = trainer.state.global_step if resumed else -1
        self._finished = False
        if not trainer.is_main_process:
            return
        if self.checkpoint is not None and self._manager is None:
            self._manager = CheckpointManager(
                self.checkpoint_dir,
                keep_last=self.keep_last,
                keep_best=self.keep_best,
                monitor=self.monitor if self.keep_best else None,
                mode=self.mode,  # type: ignore[arg-type]
                async_write=self.async_checkpoint,
                on_saved=self._checkpoint_saved,
            )
        assert self._writer is not None
        if resumed or self._reopened:
            if not resumed:
                warnings.warn(
                    f"Continuing run folder {self.run_dir} without a checkpoint to restore: "
                    f"training starts from step 0 and the folder's metric rows are reset.",
                    stacklevel=2,
                )
            # rows of the checkpoint's own step stay for a finished epoch, and inside an
            # epoch that goes on (its step-end rows, an evaluation, are not logged again)
            state = trainer.state
            going_on = state.batches_seen_in_epoch > 0 and not is_last_update(trainer)
            self._writer.put("truncate", (state.global_step, state.epoch + going_on))
        params = run_hyperparams(
            trainer, self.project, self.experiment, self.run_dir.name, self.hyperparams
        )
        self._write_json("hyperparams.json", params, periodic=True)
        self._writer.put("hyperparams", tracker_params(trainer, self.hyperparams))
        self._write_environment(trainer, resumed)
        if self.save_script and not resumed:
            copy = _files.copy_script(self.run_dir, _files.launch_script())
            if copy is not None:
                self._upload(copy.relative_to(self.run_dir).as_posix(), periodic=True)

    def _on_step_values(self, step: int, values: dict[str, Any], wall_time: float) -> None:
        """Listener of ``trainer.log``: keep step values (tensors stay on their device)."""
        if self._writer is not None:
            for name, value in values.items():
                self._steps.add(step, name, value)
            self._steps.note_time(step, wall_time)

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Keep the batch loss as a tensor (no device sync here) and the learning rate the
        update applies (read before the scheduler moves it). With several processes every
        rank keeps its loss: the step's row holds the mean over the ranks."""
        output = kwargs["batch_output"]
        if dist.is_distributed():
            self._losses.add(output["loss"], summed="num_items_in_batch" in output)
        if self._writer is not None:
            step, lr = trainer.state.global_step + 1, trainer.optimizer.param_groups[0]["lr"]
            if not dist.is_distributed():
                self._steps.add(step, "train_loss", output["loss"].detach())
            self._steps.add(step, "lr", lr.detach().clone() if torch.is_tensor(lr) else float(lr))

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Note the step's time; flush every N steps; checkpoints."""
        step = trainer.state.global_step
        loss = self._losses.step_value(keep=self._writer is not None)  # every rank
        if step % self.log_every_n_steps == 0:
            self._losses.settle()
        if self._writer is not None:
            if loss is not None:
                self._steps.add(step, "train_loss", loss)
            self._steps.note_time(step, time.time())
            if step % self.log_every_n_steps == 0:  # this step's row waits for later callbacks
                self._flush_steps(trainer, before=step)
        if isinstance(self.checkpoint, int) and step % self.checkpoint == 0:
            if self.keep_best and is_last_update(trainer):
                return  # the same weights are saved at the epoch's end, with its metrics
            self._recreate_if_removed(trainer)
            self._save_checkpoint(trainer)

    def _flush_steps(self, trainer: Trainer, before: int | None = None) -> None:
        if not self._steps or self._writer is None:
            return
        epoch = trainer.run_history.current_epoch
        rows = self._steps.rows(epoch, time.time(), before)  # one device sync
        self._writer.put("metrics", rows)

    def _log_epoch_metrics(self, trainer: Trainer) -> None:
        history, new = trainer.run_history, {}
        for name in history.get_metric_names():
            values = history.get_metric_values(name)
            if len(values) > self._seen.get(name, 0) and isinstance(values[-1], int | float):
                new[name] = float(values[-1])
            self._seen[name] = len(values)
        self._last_step = trainer.state.global_step
        if new and self._writer is not None:
            row = MetricRow(
                scope="epoch",
                step=trainer.state.global_step,
                epoch=history.current_epoch,
                time=time.time(),
                metrics=new,
            )
            self._writer.put("metrics", [row])

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self._mid_epoch = True

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self._mid_epoch = False

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        if not trainer.in_training_run:
            self._eval_before = _evaluation.metric_counts(trainer.run_history)

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """An evaluation inside a training epoch (every N steps) is logged now, at its step;
        the one after the epoch is logged with the epoch's row; a standalone one becomes
        the results ``evaluate`` (``evaluate_2``, ...)."""
        if not trainer.in_training_run:
            self._record_evaluation(trainer)
        elif self._mid_epoch and self._writer is not None:
            # the step rows before it first: loggers such as W&B take steps in order only
            self._flush_steps(trainer, before=trainer.state.global_step)
            self._log_epoch_metrics(trainer)

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Log the epoch's metrics; checkpoint; queue uploads."""
        self._losses.settle()
        if self._writer is not None:
            self._recreate_if_removed(trainer)
            self._flush_steps(trainer)
            self._log_epoch_metrics(trainer)
            self._writer.put("sync", None)
        if self.checkpoint == "epoch" or self._saves_at_epoch_end(trainer):
            self._save_checkpoint(trainer)

    def _saves_at_epoch_end(self, trainer: Trainer) -> bool:
        """With step checkpoints, whether this epoch's end is saved too: a checkpoint saved
        mid-epoch carries no epoch metric (its weights are not the ones measured), so
        keeping the best needs one saved with the epoch's metrics."""
        return (
            isinstance(self.checkpoint, int)
            and self.keep_best > 0
            and self._last_ckpt_step != trainer.state.global_step
        )

    def _save_checkpoint(self, trainer: Trainer) -> None:
        # Collective: every rank takes part in gathering RNG states; rank 0 writes (in
        # the background; _checkpoint_saved queues the upload once the file is durable).
        trainer.save_to_manager(self._manager)
        self._last_ckpt_step = trainer.state.global_step

    def _checkpoint_saved(self, info: CheckpointInfo) -> None:
        # On the checkpoint writer thread: the file and index.json are complete now.
        self._upload(f"checkpoints/{info.path.name}", periodic=True)
        self._upload("checkpoints/index.json", periodic=True)

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Final checkpoint and weights, plots, report; then wait for and verify uploads.

        A run that ``train()`` ends by raising its stop's error (``TrainingNaNError``) is
        ``failed``: it gets no final checkpoint and no ``model/``, as after a crash."""
        self._recreate_if_removed(trainer)
        failure = stop_failure(trainer, self._start_step, self._earlier_failure)  # collective
        saved = self._last_ckpt_step == trainer.state.global_step
        if self.checkpoint is not None and not saved and failure is None:
            self._save_checkpoint(trainer)
        # Every checkpoint durable and rotated files gone before the final sync (all ranks).
        flush_checkpoints(self._manager)
        self._unsubscribe()
        model, full = trainer.unwrapped_model, None
        if fsdp.is_sharded(model) and failure is None:  # collective: each rank has its shards
            full = fsdp.full_state_dicts(model, None)[0]
        if not trainer.is_main_process or self._writer is None:
            return
        self._flush_steps(trainer)
        self._log_epoch_metrics(trainer)
        if failure is None:
            _files.save_weights(model, self.run_dir / "model", full)
        with keep_ctrl_c():  # trackers flushed and closed (a resuming train() reopens them)
            self._finish(trainer, failure)
        if self._storage is not None:
            self._storage.close()
            self._storage = None

    def _record_evaluation(self, trainer: Trainer) -> None:
        """A standalone ``evaluate()``: its numbers as results; a run that never trained
        opens its loggers for them and is finished (results logged later reopen it)."""
        values = _evaluation.new_values(trainer.run_history, self._eval_before)
        never_trained = not self._trained and not self._finished
        if not values:
            return
        if never_trained:
            self.start()  # collective: every rank opens the folder together
        if not trainer.is_main_process:
            return
        if never_trained and not self._trackers:
            self._trackers = [CSVTracker(self.run_dir)]
            self._trackers += [self._make_tracker(s) for s in self.logger_specs if s != "csv"]
        self._last_step = trainer.state.global_step
        self.log_results(_evaluation.results_name(self.start()), values)
        if never_trained:
            self.finish(trainer)

    # ----------------------------------------------------------------- results & finish
    def log_results(
        self, name: str, results: Mapping[str, Any], predictions: Any = None
    ) -> Path | None:
        """Save result-package outputs as ``results/<name>.json`` (main process only).

        Args:
            name: e.g. ``"val"`` or ``"test"``: one file name (no ``/``; else a ValueError).
            results: ``{metric: value}`` (numbers, lists, nested dicts); else a TypeError.
            predictions: optional predictions saved as ``results/<name>_predictions.json``.

        Returns:
            The results file (None on other ranks). The numbers reach every logger as
            ``<name>/<metric>``. After the run finished, the report is rebuilt, the
            loggers get the results and artifacts again, and uploads are synced again."""
        _files.check_name(name, "log_results: name", "results", "val_fold1")
        results = results_mapping(results)
        if not dist.is_main_process():
            return None
        folder = self.start() / "results"
        if not folder.parent.is_dir() and self._writer is None:
            self._recreate_after_run(name)  # the run's files written back, with a warning
        elif not folder.parent.is_dir():
            warnings.warn(
                f"Experiment.log_results: the run folder {folder.parent} was removed; it is "
                f"created again to hold these results ({name!r}). What it held before (metric "
                "rows, checkpoints, report) was lost with it.",
                RuntimeWarning,
                stacklevel=2,
            )
        folder.mkdir(parents=True, exist_ok=True)
        self._write_json(f"results/{name}.json", plain_results(results))
        if predictions is not None:
            self._write_json(f"results/{name}_predictions.json", plain_results(predictions))
        numbers = result_numbers(plain_results(results))
        payload = (name, numbers, self._last_step)
        if self._writer is not None:
            self._writer.put("results", payload)
        elif self._trackers:
            dispatch(self._trackers, "results", payload, self._tracker_errors)
        if self._finished:
            self.finish(None)
            if self._storage is not None:
                self._storage.close()
                self._storage = None
        return folder / f"{name}.json"

    def finish(self, trainer: Trainer | None = None) -> UploadReport | None:
        """Write plots, report, status; wait for uploads and verify them; run ``on_complete``."""
        with keep_ctrl_c():  # a Ctrl-C that a finalizer swallowed still stops it
            return self._finish(trainer)

    def _finish(
        self, trainer: Trainer | None, failure: dict[str, Any] | None = None
    ) -> UploadReport | None:
        """``failure``: the ``error`` of a stop that ``train()`` raises: the run is ``failed``
        (and stays so when results are logged after it)."""
        from scramjet.tracking.report import report_of_an_ended_run

        self._ensure_storage()
        path = self.run_dir / "run.json"
        info = _files.read_json(path)
        if trainer is not None:
            info["last_step"] = trainer.state.global_step
        info.pop("upload_error", None)
        for key, value in {**self._run_fields(), "started": self._opened_at}.items():
            info.setdefault(key, value)  # a run that never trained: only start() opened it
        info.update(failure or {})
        if not (self._finished and info.get("status") in ("finished", "failed")):
            _files.mark_ended(info, "finished" if failure is None else "failed")
        failed = info.get("status") == "failed"  # results logged after the run keep its end
        # The report reads the final status and duration; kept for a folder removed later
        self._kept_json["run.json"] = _files.write_json(path, info)
        report_of_an_ended_run(self.run_dir)
        raise_lost_ctrl_c()
        # Cut short from here on (the trackers closed), close() records the run as not mirrored
        self._syncing = self._storage is not None
        self._end_trackers("failed" if failed else "finished")
        raise_lost_ctrl_c()
        if self._tracker_errors:
            info = record_tracker_errors(path, self._tracker_errors)
        self._finished = True
        ended = None if failed else info  # a failed run keeps its status whatever the upload
        self.upload_report = self._sync(ended) if self._storage is not None else None
        report = self.upload_report
        if report is not None and not report.ok:
            reason = f" ({report.error})" if report.error else ""
            status = "" if failed else " (status 'upload-failed')"
            warnings.warn(
                f"Training {'failed and' if failed else 'finished but'} uploading the run to "
                f"{report.remote} failed{reason} for {len(report.failures)} file(s); local "
                f"files are intact in {self.run_dir}{status}. See manifest.json; rerun "
                f"Experiment(..., resume=...) or copy them by hand.",
                stacklevel=2,
            )
        elif self.on_complete is not None and not failed:
            self.on_complete(self.upload_report)
        return self.upload_report

    def _end_trackers(self, status: str) -> None:
        """Artifacts (for a finished run), status, close: through the writer thread during
        the run, directly after it (results logged after ``train()``)."""
        if self._writer is not None:
            if status == "finished":
                self._writer.put("artifacts", (self.run_dir, _files.artifact_files(self.run_dir)))
            self._writer.put("status", status)
            self._writer.close()
            self._tracker_errors.extend(self._writer.errors)
            self._writer = None
            self._warn_logger_notes()  # a logger's files removed after the last check
            return
        if self._trackers:
            if status == "finished":
                artifacts = (self.run_dir, _files.artifact_files(self.run_dir))
                dispatch(self._trackers, "artifacts", artifacts, self._tracker_errors)
            dispatch(self._trackers, "status", status, self._tracker_errors)
            dispatch(self._trackers, "close", None, self._tracker_errors)

    def _flush_pending(self) -> None:
        """After a crash: the step values not written yet (a failing device may refuse the
        copy: they are lost then, with a warning)."""
        if not self._steps or self._writer is None or self._history is None:
            return
        self._steps.drop_unfinished()
        try:
            rows = self._steps.rows(self._history.current_epoch, time.time())
        except Exception as exc:
            warnings.warn(f"Experiment: step values lost: {exc}", RuntimeWarning, stacklevel=3)
            return
        self._writer.put("metrics", rows)

    def _unsubscribe(self) -> None:
        if self._metric_log is not None:
            self._metric_log.unsubscribe(self._on_step_values)
            self._metric_log = None

    def close(self) -> None:
        """After a failed run: flush metrics, mark the run ``interrupted`` (a
        ``KeyboardInterrupt``, e.g. Ctrl-C, or a preemption that saved and stopped) or
        ``failed``, mirror what exists, stop threads."""
        error = sys.exc_info()[1]  # the Trainer calls close() while handling the error
        stopped = isinstance(error, KeyboardInterrupt | TrainingPreempted)
        status = "interrupted" if stopped else "failed"
        self._unsubscribe()
        if self._manager is not None:
            try:  # the checkpoint in flight, if any, is completed (or reported) first
                self._manager.close()
            except Exception as exc:
                warnings.warn(f"Experiment: {exc}", RuntimeWarning, stacklevel=2)
        if self._writer is not None:
            if dist.is_main_process():
                self._recreate_if_removed(None)
            self._flush_pending()
            self._end_trackers(status)
            if not self._finished and self._run_dir is not None and dist.is_main_process():
                # last_step: the optimizer updates completed before the end
                done = {} if self._state is None else {"last_step": int(self._state.global_step)}
                _files.record_end(self.run_dir, status, error, **done)
                if error is not None and not stopped:
                    record_traceback(self.run_dir, error)
                from scramjet.tracking.report import report_of_an_ended_run

                report_of_an_ended_run(self.run_dir)
                if self._storage is not None:
                    self.upload_report = self._sync()
        if self._syncing and self._run_dir is not None:  # the final sync of finish()
            self._syncing = False
            cut = "the final upload and its check were cut short; resume the run to mirror it"
            _files.record_end(self.run_dir, status, error, upload_error=cut)
        if self._storage is not None:
            self._storage.close()
            self._storage = None

    # ----------------------------------------------------------------- checkpoint state
    def state_dict(self) -> dict[str, Any]:
        """The run folder, so ``train(resume_from=...)`` continues it.

        Before the folder is opened, that is the one a restored state named (if any).
        """
        self._write_pending()
        run = self._run_dir or self._restored_dir
        return {"run_dir": str(run.resolve()) if run else ""}

    def _write_pending(self) -> None:
        """Before a checkpoint: the step rows kept so far reach the metric files. A resume
        drops only rows after the checkpoint's step, so rows still in memory when the
        process is killed would never be written."""
        if self._writer is None or self._history is None:
            return
        if self._steps:
            self._writer.put("metrics", self._steps.rows(self._history.current_epoch, time.time()))
        self._writer.flush()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the restored checkpoint's run folder, found by name under this root.

        The stored path is a hint, never a destination: only its last part (the run's
        name) is used, under ``root/project`` of this Experiment. A checkpoint copied with
        its run folder to another root continues the copy and leaves the original alone; a
        name that is not a run folder there (or a crafted path) starts a new run folder.
        """
        name = PurePath(str(state.get("run_dir") or "")).name
        if self._run_dir is not None or name in ("", ".", ".."):
            return
        candidate = self.root / self.project / name
        if candidate.is_dir() and (candidate / "run.json").is_file():
            self._restored_dir = candidate


__all__ = ["Experiment"]
