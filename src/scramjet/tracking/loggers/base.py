"""The one small interface every tracker backend implements.

Every backend receives the same metric names: the names given to ``trainer.log`` (and
``train_loss``, ``lr``, ``train_loss_epoch``, ``eval_loss_epoch``), results as
``<results name>/<metric>`` (``test/accuracy``), and ``epoch`` with each epoch row.
Step and epoch values share one x axis, the optimizer step, so their curves overlay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

#: How a run ended, as ``run.json`` and the loggers record it.
RUN_STATUSES = ("running", "finished", "failed", "interrupted", "upload-failed")


class MetricRow(TypedDict):
    """One batch of metric values taken at the same point of training.

    ``scope`` is ``"step"`` (per optimizer update) or ``"epoch"``; ``step`` is the
    optimizer step and ``epoch`` the 1-based epoch the values belong to.
    """

    scope: str
    step: int
    epoch: int
    time: float
    metrics: dict[str, float]


class Tracker:
    """Base class of the metric loggers (CSV/JSONL, TensorBoard, MLflow, W&B).

    The :class:`~scramjet.tracking.Experiment` calls these methods on the main process
    only, from a background thread, with rows batched (every ``log_every_n_steps`` steps
    and at epoch ends), so a backend never runs per training step. After :meth:`close`,
    a backend accepts :meth:`log_results`, :meth:`log_artifacts` and :meth:`set_status`
    again (results logged after ``train()``), reopening what it needs and closed again by
    the next :meth:`close`.
    """

    #: Short name used in ``Experiment(loggers=(...))``.
    name = "tracker"

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Record the run's hyperparameters (called once per training run): a flat
        ``{name: value}`` of the user's hyperparameters and the trainer's meaningful
        settings (``optimizer``, ``optimizer.lr``, ``batch_size``, ...); each value is a
        bool, int, float, str, None, or a list of those (:func:`param_value`)."""

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Record a batch of metric rows."""

    def log_results(self, name: str, results: Mapping[str, float], step: int) -> None:
        """Record the numbers of a result package (``Experiment.log_results``) at ``step``;
        names are ``<name>/<metric>``."""

    def log_artifacts(self, run_dir: Path, files: Sequence[str]) -> None:
        """Keep copies of the run's key files (``files``: paths relative to ``run_dir``:
        report, results, final model), for backends that store files."""

    def set_status(self, status: str) -> None:
        """How the run ended (one of :data:`RUN_STATUSES`); called before :meth:`close`."""

    def truncate(self, step: int, epoch: int) -> None:
        """Forget rows logged after a checkpoint that a resume restarts from: ``step``
        updates; ``epoch``, the epochs whose epoch-scope rows at ``step`` itself stay
        (the finished ones, and the epoch the checkpoint is inside of when it goes on)."""

    def close(self) -> None:
        """Flush and release files or connections."""

    def reopen_removed_files(self) -> None:
        """Start new files for those of this logger removed while the run goes on (its
        folder deleted by a cleanup, say), noting what was lost (see :meth:`take_notes`).
        The loggers that write into the run folder check this before each write too, so
        the values logged after a removal are kept."""

    def take_notes(self) -> list[str]:
        """What this logger started again since the last call because its files were
        removed, one phrase each (the Experiment says them in one warning)."""
        notes: list[str] = self.__dict__.get("_notes", [])
        taken = notes[: len(notes)]
        del notes[: len(taken)]  # a note added meanwhile (another thread) stays for later
        return taken

    def _note(self, text: str) -> None:
        self.__dict__.setdefault("_notes", []).append(text)


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"opt": {"lr": 0.1}}`` → ``{"opt.lr": 0.1}``; see :func:`param_value` for values."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, f"{name}."))
        else:
            flat[name] = param_value(value)
    return flat


def param_value(value: Any) -> Any:
    """A hyperparameter as trackers take it: a bool, int, float, str or None as it is, a
    list or tuple of those as it is (W&B filters and groups runs by them; MLflow and
    TensorBoard show its text, ``(16, 8)`` for a tuple as before), anything else as its
    text."""
    if isinstance(value, _PLAIN) or value is None:
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, _PLAIN) or v is None for v in value):
        return list(value) if isinstance(value, list) else tuple(value)
    return str(value)


_PLAIN = (bool, int, float, str)
