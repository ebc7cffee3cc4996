"""Weights & Biases runs (``pip install 'scramjet[wandb]'``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking.loggers.base import MetricRow, Tracker

_EXIT_CODES = {"finished": 0, "upload-failed": 0, "interrupted": 255}

#: Seconds between W&B's writes of its ``.wandb`` file (W&B's default, 15 s, loses that
#: much of a run killed outright: ``kill -9``, the out-of-memory killer).
FLUSH_INTERVAL_S = 1.0


def _settings() -> Any:
    """W&B settings that write the ``.wandb`` file every :data:`FLUSH_INTERVAL_S`
    (None for a W&B too old to have that setting: its own behaviour then)."""
    import wandb

    if "x_transaction_log_flush_interval" not in getattr(wandb.Settings, "model_fields", {}):
        return None
    return wandb.Settings(x_transaction_log_flush_interval=FLUSH_INTERVAL_S)


class WandbTracker(Tracker):
    """Logs to a W&B run named after the run folder, in the W&B project of the scramjet project.

    Metrics use the optimizer step as W&B's ``step`` (epoch rows add ``epoch``) and carry
    the step's own wall time; the config holds the meaningful settings (see
    :meth:`Tracker.log_hyperparams`); results go to the summary as ``<name>/<metric>``; the
    report, the results and the final model are saved with the run. W&B's files go to
    ``<run folder>/wandb``. ``WANDB_MODE=offline`` writes the run there without a network
    (``wandb sync`` uploads it later); online runs need ``wandb login`` or ``WANDB_API_KEY``.
    W&B writes its ``.wandb`` file every :data:`FLUSH_INTERVAL_S` seconds, so a process
    killed outright keeps every step but the last one logged before then.

    Args:
        run_dir: the run folder.
        project: the W&B project.
        run_name: the W&B run's display name (default: the run folder's name).
        run_id: the W&B run id; the same id continues the run (used on resume).
        entity: the W&B entity (team or user); default: W&B's own default.
        mode: ``"online"``, ``"offline"`` or ``"disabled"``; default ``$WANDB_MODE`` or online.
    """

    name = "wandb"

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        project: str,
        run_name: str | None = None,
        run_id: str | None = None,
        entity: str | None = None,
        mode: str | None = None,
    ) -> None:
        try:
            import wandb  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "loggers=('wandb',) needs Weights & Biases: pip install 'scramjet[wandb]'"
            ) from exc
        self.run_dir = Path(run_dir)
        self.project, self.entity = project, entity
        # read $WANDB_MODE now: W&B's process-wide settings may predate it
        self.mode = mode or os.environ.get("WANDB_MODE") or None
        self.run_name = run_name or self.run_dir.name
        self.run_id: str = run_id or uuid.uuid4().hex[:8]
        self._config: dict[str, Any] = {}
        self._exit_code = 0
        self._run: Any = None
        self._log_file: Path | None = None  # an offline run's .wandb file, while it runs
        self._log_seen = False  # that file was there once (W&B's process creates it)
        _ = self.run  # started now, on the training process's main thread: errors show at once

    @property
    def run(self) -> Any:
        """The W&B run (started, or continued after :meth:`close`, on first use; continued
        in new files after its offline files were removed: see :meth:`reopen_removed_files`)."""
        self.reopen_removed_files()
        if self._run is None:
            import wandb

            self._run = wandb.init(
                project=self.project,
                entity=self.entity,
                name=self.run_name,
                id=self.run_id,
                dir=str(self.run_dir),
                mode=self.mode,  # type: ignore[arg-type]
                config=self._config or None,
                resume="allow",
                reinit="create_new",
                settings=_settings(),
            )
            log = Path(self._run.settings.sync_file or "")
            self._log_file = log if self._run.offline and log.name else None
            self._log_seen = log.is_file()
        return self._run

    def reopen_removed_files(self) -> None:
        """An offline run whose ``.wandb`` file was removed (the run folder or its
        ``wandb/`` deleted while training): W&B's process writes on into the removed file,
        which nothing could upload, so the run is finished and continued (same id) in a
        new offline run folder, where the next rows go. Online runs are left to W&B."""
        if self._run is None or self._log_file is None:
            return
        if self._log_file.exists():
            self._log_seen = True
            return
        if not self._log_seen:  # not created yet
            return
        removed, self._run, self._log_file = self._run, None, None
        said = ""
        try:
            removed.finish(exit_code=0)  # into the removed files: nothing of it is kept
        except Exception as exc:  # the new run is what counts; the note says it
            said = f" (finishing the removed one raised {type(exc).__name__}: {exc})"
        self._note(
            f"W&B: its offline run folder {Path(removed.settings.sync_dir).name} was removed "
            f"with the rows, config and summary written to it; run {self.run_id} continues "
            f"in a new offline run folder under {self.run_dir / 'wandb'}, with the config "
            f"and the later rows{said}"
        )

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Store the settings in the run's config."""
        self._config = dict(params)
        self.run.config.update(self._config, allow_val_change=True)

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Log each row at its step, with its wall time."""
        run = self.run
        for row in rows:
            values: dict[str, Any] = dict(row["metrics"])
            if row["scope"] == "epoch":  # a value the user named "epoch" is kept as given
                values.setdefault("epoch", row["epoch"])
            values["_timestamp"] = row["time"]
            run.log(values, step=row["step"])

    def log_results(self, name: str, results: Mapping[str, float], step: int) -> None:
        """Put each number in the run's summary as ``<name>/<metric>``."""
        summary = self.run.summary
        for metric, value in results.items():
            summary[f"{name}/{metric}"] = value

    def log_artifacts(self, run_dir: Path, files: Sequence[str]) -> None:
        """Save the files with the run (uploaded with it), keeping their folders."""
        for rel in files:
            self.run.save(str(run_dir / rel), base_path=str(run_dir), policy="now")

    def set_status(self, status: str) -> None:
        """The exit code the run finishes with (0: finished, 255: interrupted, 1: failed)."""
        self._exit_code = _EXIT_CODES.get(status, 1)

    def close(self) -> None:
        """Finish the W&B run."""
        if self._run is not None:
            self._run.finish(exit_code=self._exit_code)
            self._run = None
