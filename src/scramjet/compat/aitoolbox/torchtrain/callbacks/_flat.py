"""scramjet's own history reporters with a ``folder`` argument, kept under the flat import path.

:class:`ModelTrainHistoryPlot` (one PNG per metric), :class:`ModelTrainHistoryFileWriter`
(``train_history.jsonl`` and ``.txt``) and :class:`TensorBoardFullTracker`. AIToolbox's
reporters, which write into the experiment folder, are in ``performance_eval``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback

__all__ = [
    "ModelTrainHistoryFileWriter",
    "ModelTrainHistoryPlot",
    "TensorBoardFullTracker",
    "TensorboardFullTracker",
]


def _output_dir(loop: Any, folder: str | os.PathLike[str] | None, sub: str) -> Path:
    if folder is not None:
        path = Path(folder)
    elif loop is not None and loop.experiment is not None:
        path = loop.experiment.start() / sub
    else:
        path = Path(sub)
    path.mkdir(parents=True, exist_ok=True)
    return path


class _EpochOrTrainEnd(AbstractCallback):
    """Runs :meth:`_act` at each epoch end and/or at the end of training, as asked."""

    def __init__(
        self,
        epoch_end: bool = True,
        train_end: bool = False,
        folder: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(type(self).__name__)
        self.epoch_end, self.train_end, self.folder = epoch_end, train_end, folder

    def _act(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_epoch_end(self) -> None:
        """Act if asked."""
        if self.epoch_end:
            self._act()

    def on_train_end(self) -> None:
        """Act if asked."""
        if self.train_end:
            self._act()


class ModelTrainHistoryPlot(_EpochOrTrainEnd):
    """Plots every history metric to ``<folder>/<metric>.png`` (default: the run's ``plots/``).

    Args:
        epoch_end: plot after every epoch.
        train_end: plot at the end of training.
        folder: output folder; default the tracked run's ``plots/`` or ``./plots``.
    """

    written: list[Path]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.written = []

    def _act(self) -> None:
        from scramjet.runtime.files import safe_stem
        from scramjet.tracking.report import _plot_lines, _write

        assert self.train_loop_obj is not None
        out = _output_dir(self.train_loop_obj, self.folder, "plots")
        for name, values in self.train_loop_obj.train_history.items():
            numbers = [float(v) for v in values if isinstance(v, int | float)]
            if numbers:
                xs = list(range(1, len(numbers) + 1))
                self.written.append(
                    _write(
                        out / f"{safe_stem(name)}.png",
                        _plot_lines(name, [(name, xs, numbers)], "epoch"),
                    )
                )


class ModelTrainHistoryFileWriter(_EpochOrTrainEnd):
    """Appends each epoch's history values to ``<folder>/train_history.jsonl`` and ``.txt``."""

    path: Path | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.path = None

    def _act(self) -> None:
        assert self.train_loop_obj is not None
        out = _output_dir(self.train_loop_obj, self.folder, "results")
        self.path = out / "train_history.jsonl"
        latest = {k: v[-1] for k, v in self.train_loop_obj.train_history.items() if v}
        record = {"epoch": self.train_loop_obj.epoch + 1, **latest}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=float) + "\n")
        with open(out / "train_history.txt", "a", encoding="utf-8") as fh:
            fh.write(" | ".join(f"{k}: {v}" for k, v in record.items()) + "\n")


class TensorBoardFullTracker(AbstractCallback):
    """Writes every history metric per epoch to TensorBoard (``pip install 'scramjet[tensorboard]'``).

    Args:
        log_dir: event folder; default ``<run>/tensorboard`` of the tracked run or
            ``./tensorboard``.
    """

    def __init__(self, log_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        super().__init__("TensorBoardFullTracker")
        self.log_dir = log_dir
        self._writer: Any = None

    def on_train_begin(self) -> None:
        """Open the event file."""
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(
            str(_output_dir(self.train_loop_obj, self.log_dir, "tensorboard"))
        )

    def on_epoch_end(self) -> None:
        """Add the epoch's values."""
        assert self.train_loop_obj is not None and self._writer is not None
        epoch = self.train_loop_obj.epoch + 1
        for name, values in self.train_loop_obj.train_history.items():
            if values and isinstance(values[-1], int | float):
                self._writer.add_scalar(name, float(values[-1]), epoch)

    def on_train_end(self) -> None:
        """Close the event file."""
        if self._writer is not None:
            self._writer.close()


TensorboardFullTracker = TensorBoardFullTracker
