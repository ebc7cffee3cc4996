"""TensorBoard event files (``pip install 'scramjet[tensorboard]'``)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scramjet.tracking.loggers.base import MetricRow, Tracker, flatten_params


class TensorBoardTracker(Tracker):
    """Writes scalars to ``<run>/tensorboard`` as ``step/<name>`` and ``epoch/<name>``.

    Step-scope values use the optimizer step as x; epoch-scope values use the epoch.
    Hyperparameters are stored as a text summary (JSON).

    Args:
        run_dir: the run folder (events go to ``run_dir/tensorboard``).
    """

    name = "tensorboard"

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise ImportError(
                "loggers=('tensorboard',) needs TensorBoard: pip install 'scramjet[tensorboard]'"
            ) from exc
        self.log_dir = Path(run_dir) / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=30)

    def log_hyperparams(self, params: Mapping[str, Any]) -> None:
        """Store the hyperparameters as a JSON text summary."""
        text = json.dumps(flatten_params(params), indent=1, default=str)
        self.writer.add_text("hyperparams", f"```\n{text}\n```", 0)

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        """Add every value as a scalar."""
        for row in rows:
            x = row["step"] if row["scope"] == "step" else row["epoch"]
            for name, value in row["metrics"].items():
                self.writer.add_scalar(f"{row['scope']}/{name}", value, x, walltime=row["time"])

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.flush()
        self.writer.close()
