"""TensorBoard event files (``pip install 'scramjet[tensorboard]'``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking.loggers.base import MetricRow, Tracker

_HPARAM_TYPES = (bool, int, float, str)


class TensorBoardTracker(Tracker):
    """Writes scalars and HParams entries into the run folder itself.

    The event files sit in the run folder, so ``tensorboard --logdir <root>/<project>``
    names each run after its folder. Every value is a scalar under its metric name
    (``train_loss``, ``lr``, ``eval_loss_epoch``, your ``trainer.log`` names, results as
    ``test/accuracy``) with the optimizer step as x and the step's own wall time, so step
    and epoch curves overlay; each epoch row also writes ``epoch``. The HParams dashboard
    gets the hyperparameters when the run starts (a session start) and the run's status
    when it ends (a session end); its metrics are the run's scalars, whose last values it
    shows. No experiment summary is written: TensorBoard then builds the table from the
    sessions of every run under ``--logdir``, so runs with different hyperparameters
    compare in one table.

    Args:
        run_dir: the run folder (events are written there).
    """

    name = "tensorboard"

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "loggers=('tensorboard',) needs TensorBoard: pip install 'scramjet[tensorboard]'"
            ) from exc
        self.log_dir = Path(run_dir)
        self._writer: Any = None
        self._started = False
        self._status = "finished"
        self._purge_step: int | None = None

    @property
    def writer(self) -> Any:
        """The ``SummaryWriter`` (a new event file after :meth:`close`)."""
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(
                log_dir=str(self.log_dir), flush_secs=30, purge_step=self._purge_step
            )
            self._purge_step = None
        return self._writer

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Start the HParams session with the hyperparameters (scalars and strings)."""
        from torch.utils.tensorboard.summary import hparams

        kept = {k: v for k, v in params.items() if isinstance(v, _HPARAM_TYPES)}
        _, start, _ = hparams(kept, {})
        self.writer.file_writer.add_summary(start)
        self._started = True

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Add every value as a scalar at the row's step and wall time: one event per row
        holding all its values (what ``add_scalar`` per value writes, in fewer records)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        file_writer = self.writer.file_writer
        for row in rows:
            values = [
                Summary.Value(tag=name, simple_value=float(value))
                for name, value in row["metrics"].items()
            ]
            if row["scope"] == "epoch":
                values.append(Summary.Value(tag="epoch", simple_value=float(row["epoch"])))
            file_writer.add_summary(Summary(value=values), row["step"], row["time"])

    def log_results(self, name: str, results: Mapping[str, float], step: int) -> None:
        """Add each number as the scalar ``<name>/<metric>``."""
        for metric, value in results.items():
            self.writer.add_scalar(f"{name}/{metric}", value, step)

    def truncate(self, step: int, epoch: int) -> None:
        """A resumed run: TensorBoard drops the events after ``step`` (a purge marker at the
        start of the next event file), so the curves read as one run."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._purge_step = step + 1

    def set_status(self, status: str) -> None:
        """Kept for the HParams session's end."""
        self._status = status

    def close(self) -> None:
        """End the HParams session with the run's status, flush and close the event file."""
        if self._started and self._writer is not None:
            self._writer.file_writer.add_summary(_session_end(self._status))
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None


def _session_end(status: str) -> Any:
    """The HParams session-end summary with the run's status."""
    from tensorboard.plugins.hparams import api_pb2
    from torch.utils.tensorboard.summary import hparams

    _, _, end = hparams({}, {})
    # HParams knows success and failure: an interrupted run did not finish.
    done = status in ("finished", "upload-failed")
    code = api_pb2.STATUS_SUCCESS if done else api_pb2.STATUS_FAILURE
    return _with_status(end, code)


def _with_status(summary: Any, code: int) -> Any:
    from tensorboard.plugins.hparams import plugin_data_pb2

    value = summary.value[0]
    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    data.session_end_info.status = code
    value.metadata.plugin_data.content = data.SerializeToString()
    return summary
