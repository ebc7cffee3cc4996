"""The run folder across ``train()`` calls: a new folder for a new run from step 0, the
restore of a continued folder's checkpoint, and ``environment.json`` (with each resume).
A base class of :class:`~scramjet.tracking.experiment.Experiment`, which holds the state
it reads."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scramjet.checkpoint import CheckpointManager, CheckpointWriteError
from scramjet.runtime.files import atomic_write_text
from scramjet.tracking import _files
from scramjet.tracking import _json as strict_json
from scramjet.tracking._writer import dispatch

if TYPE_CHECKING:
    from scramjet.trainer.trainer import Trainer


class RunFolder:
    """Which folder a ``train()`` writes to, and what it records of the environment."""

    project: str
    experiment: str
    hyperparams: dict[str, Any]
    checkpoint: str | int | None
    resume: Any
    _opened_at: float
    _state: Any
    _run_dir: Path | None
    _reopened: bool
    _restored_dir: Path | None
    _manager: CheckpointManager | None
    _finished: bool
    _trackers: list[Any]
    _tracker_errors: list[str]
    _last_step: int
    _previous_run: Path | None
    _writer: Any
    _storage: Any
    _kept_json: dict[str, str]

    if TYPE_CHECKING:

        @property
        def run_dir(self) -> Path: ...

        @property
        def checkpoint_dir(self) -> Path: ...

        def close(self) -> None: ...

        def _run_fields(self) -> dict[str, Any]: ...

        def _write_json(self, rel: str, data: Any, periodic: bool = False) -> None: ...

        def _upload(self, rel: str, periodic: bool = False) -> None: ...

    def _next_run(self, trainer: Trainer) -> None:
        """A new ``train()`` from step 0 with this Experiment: a new run folder.

        Its rows would repeat the earlier run's steps and its checkpoints would mix with
        them, so the earlier folder stays as it ended and the new one names it
        (``previous_run`` in ``run.json``). A ``train()`` that resumes a checkpoint (its
        step > 0) continues the current folder instead.
        """
        previous = self._run_dir
        if self._writer is not None or self._storage is not None:  # never closed: a crash
            self.close()
        self._run_dir, self._reopened, self._restored_dir = None, False, None
        self.resume, self._manager, self._finished = None, None, False
        self._trackers, self._tracker_errors, self._last_step = [], [], 0
        self._previous_run, self._kept_json = previous, {}
        if previous is not None:
            trainer.print(
                f"Experiment: train() started again from step 0, so this is a new run; the "
                f"earlier one stays in {previous}."
            )

    def _self_restore(self, trainer: Trainer) -> None:
        ckpts = self.checkpoint_dir
        if not ckpts.is_dir() or CheckpointManager(ckpts, keep_last=None).latest_path is None:
            return
        trainer.load_checkpoint(ckpts)

    def _write_environment(self, trainer: Trainer, resumed: bool) -> None:
        path = self.run_dir / "environment.json"
        current = _files.environment(trainer.seed, trainer.device, trainer.num_processes)
        if resumed and path.exists():
            env = _files.read_json(path)
            env.setdefault("resumes", []).append(
                {"time": time.time(), "step": trainer.state.global_step, "environment": current}
            )
        else:
            env = current
        self._write_json("environment.json", env, periodic=True)

    def _recreate_if_removed(self, trainer: Trainer | None) -> None:
        """The run folder deleted while training (a cleanup script, a user): create it
        again with what the run still knows (``run.json``, ``hyperparams.json`` and
        ``environment.json`` as last written, the epoch metric rows, each logger's files
        started again), say once what was lost, and let training continue. Without
        ``trainer`` (``close()`` after a failure) the folder is created again to record how
        the run ended. A logger's own files removed alone: one warning."""
        run = self._run_dir
        if run is None or self._writer is None:
            return
        if (run / "run.json").is_file():
            self._warn_logger_notes()
            return
        unsaved = self._unsaved_checkpoint()
        self._writer.put("reopen", None)  # each logger writes its files again
        self._writer.flush()  # rows in flight may fail against the missing folder: counted
        lost = [e for e in self._writer.errors if e.startswith("csv: metrics: FileNotFoundError")]
        self._writer.errors[:] = [e for e in self._writer.errors if e not in lost]
        (run / "checkpoints").mkdir(parents=True, exist_ok=True)
        state = self._state if trainer is None else trainer.state
        step = 0 if state is None else int(state.global_step)
        self._write_back_json(step)
        parts = ["the checkpoints written before"] if self.checkpoint is not None else []
        if lost:
            parts.append(f"{len(lost)} batch(es) of metric rows written while it was gone")
        if unsaved:
            parts.append(f"the checkpoint being written then ({unsaved})")
        notes = [n for t in self._trackers for n in t.take_notes()]
        then = "and training continues" if trainer else "to record how the run ended"
        later = "Rows and checkpoints are written to it again from now on; " if trainer else ""
        warnings.warn(
            f"Experiment: the run folder {run} was removed while training (noticed at step "
            f"{step}); it was created again {then}, with run.json, hyperparams.json and "
            f"environment.json written back"
            + "".join(f"; {n}" for n in notes)
            + (f". Lost with it: {', '.join(parts)}" if parts else "")
            + f". {later}its run.json records 'folder_recreated'.",
            RuntimeWarning,
            stacklevel=3,
        )

    def _recreate_after_run(self, name: str) -> None:
        """The run folder deleted after the run (``log_results(name)`` then): create it
        again as :meth:`_recreate_if_removed` does (each logger's files started again, with
        the epoch metric rows; ``run.json``, ``hyperparams.json`` and ``environment.json`` as
        last written) and say once what was written back; the report is rebuilt after."""
        run = self.run_dir
        run.mkdir(parents=True, exist_ok=True)
        dispatch(self._trackers, "reopen", None, self._tracker_errors)
        written = self._write_back_json(self._last_step, running=False)
        notes = [n for t in self._trackers for n in t.take_notes()]
        parts = ["the checkpoints"] if self.checkpoint is not None else []
        parts.append("the files of the other loggers in it")
        named = f"{', '.join(written[:-1])} and {written[-1]}" if written[1:] else written[0]
        warnings.warn(
            f"Experiment.log_results: the run folder {run} was removed; it is created again "
            f"to hold these results ({name!r}), with {named} written back"
            + "".join(f"; {n}" for n in notes)
            + f". Lost with it: {', '.join(parts)}; the report "
            "is written again and run.json records 'folder_recreated'.",
            RuntimeWarning,
            stacklevel=3,
        )

    def _write_back_json(self, step: int, running: bool = True) -> list[str]:
        """``run.json`` (``folder_recreated``; status running unless ``running`` is False:
        after the run), ``hyperparams.json`` and ``environment.json`` as this run last
        wrote them; returns the names written."""
        kept = self._kept_json
        info = {"started": self._opened_at, **strict_json.loads(kept.get("run.json", "{}"))}
        if running:
            info.update(status="running", **self._run_fields())
        for key, value in self._run_fields().items():
            info.setdefault(key, value)  # after a run that only start() opened
        info["folder_recreated"] = {"time": time.time(), "step": step}
        if self._previous_run is not None:
            info["previous_run"] = self._previous_run.name
        self._write_json("run.json", info)
        written = ["run.json"]
        for rel in ("hyperparams.json", "environment.json"):
            if rel in kept:
                atomic_write_text(self.run_dir / rel, kept[rel])
                self._upload(rel)
                written.append(rel)
        return written

    def _warn_logger_notes(self) -> None:
        """A logger whose own files were removed (the run folder kept) started new ones:
        say what it said, once."""
        notes = [n for t in self._trackers for n in t.take_notes()]
        if notes:
            warnings.warn(
                f"Experiment: files of the run's loggers in {self._run_dir} were removed "
                f"while training; each started new ones and logging continues: "
                f"{'; '.join(notes)}.",
                RuntimeWarning,
                stacklevel=3,
            )

    def _unsaved_checkpoint(self) -> str | None:
        """The background checkpoint write that the folder's removal made fail, if any."""
        if self._manager is None:
            return None
        try:
            self._manager.wait()
        except CheckpointWriteError as exc:
            return str(exc).split("'", 2)[1] if str(exc).count("'") >= 2 else str(exc)
        return None


__all__ = ["RunFolder"]
