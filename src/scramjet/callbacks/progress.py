"""Callbacks that report progress: metric lines, a progress bar, plain progress prints."""

from __future__ import annotations

import math
import sys
import time
from typing import IO, TYPE_CHECKING, Any

from scramjet.callbacks._display import LiveOrPlain
from scramjet.callbacks.base import TrainerCallback

if TYPE_CHECKING:
    from scramjet.trainer import Trainer


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


class LogMetricsCallback(TrainerCallback):
    """Prints the latest value of every metric at the end of each epoch (main process).

    Args:
        file: where to write (default: standard output).
    """

    def __init__(self, file: IO[str] | None = None) -> None:
        self.file = file

    def _log(self, trainer: Trainer, names: list[str]) -> None:
        if not trainer.is_main_process or not names:
            return
        history = trainer.run_history
        parts = [f"{n}: {_format_value(history.get_latest_metric(n))}" for n in sorted(names)]
        print(
            f"epoch {history.current_epoch} | " + " | ".join(parts),
            file=self.file or sys.stdout,
            flush=True,
        )

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Log every metric recorded so far (train and eval)."""
        self._log(trainer, list(trainer.run_history.get_metric_names()))

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Log eval metrics of a standalone ``evaluate()`` call."""
        if not trainer.in_training_run:
            names = [n for n in trainer.run_history.get_metric_names() if n.startswith("eval")]
            self._log(trainer, names)


class PrintProgressCallback(TrainerCallback):
    """Prints one line when each training and evaluation run and epoch starts and ends."""

    def __init__(self, file: IO[str] | None = None) -> None:
        self.file = file

    def _say(self, trainer: Trainer, text: str) -> None:
        if trainer.is_main_process:
            print(text, file=self.file or sys.stdout, flush=True)

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Announce the run."""
        self._say(trainer, "Starting training run")

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Announce the epoch."""
        self._say(trainer, f"Starting epoch {trainer.run_history.current_epoch}")

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Close the epoch."""
        self._say(trainer, f"Finished epoch {trainer.run_history.current_epoch}")

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Announce evaluation."""
        self._say(trainer, "Starting evaluation")

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Close evaluation."""
        self._say(trainer, "Finished evaluation")

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Close the run."""
        self._say(trainer, "Finished training run")


class _ProgressView:
    """A renderable that reads the trainer's counters whenever rich refreshes.

    Nothing is done per step: the loop only increments its own counters; the display
    thread samples them a few times per second.
    """

    def __init__(self, trainer: Trainer, total: int, stage: str) -> None:
        self.trainer, self.total, self.stage = trainer, total, stage
        self.start = time.perf_counter()
        self.start_done = trainer.state.batches_seen_in_epoch
        self.start_samples = trainer.state.samples_seen

    def snapshot(self) -> tuple[int, float, float]:
        done = self.trainer.state.batches_seen_in_epoch if self.stage == "train" else 0
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        rate_b = (done - self.start_done) / elapsed
        samples = (self.trainer.state.samples_seen - self.start_samples) / elapsed
        eta = (self.total - done) / rate_b if rate_b > 0 and self.total else math.nan
        return done, samples, eta

    def text(self) -> str:
        done, samples, eta = self.snapshot()
        head = f"epoch {self.trainer.run_history.current_epoch} {self.stage}"
        if not self.total:  # unknown length (an iterable): a running count, no total, no ETA
            return f"{head} {done} batches | {samples:,.0f} samples/s"
        eta_s = f"{eta:,.0f}s" if math.isfinite(eta) else "--"
        return f"{head} {done}/{self.total} | {samples:,.0f} samples/s | ETA {eta_s}"

    def __rich__(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        done, _, _ = self.snapshot()
        grid = Table.grid(padding=(0, 1))
        grid.add_row(ProgressBar(total=self.total or None, completed=done, width=40), self.text())
        return grid


class ProgressBarCallback(TrainerCallback):
    """A progress bar with throughput (samples/s) and ETA for each training epoch.

    On a terminal it is drawn with ``rich.live`` and refreshed by rich's timer thread;
    when output is not a terminal (CI logs, files, ``TERM=dumb``) it prints a plain line
    every ``interval`` seconds and at the end of each epoch. Either way the training loop
    does no per-step work for it.

    Args:
        file: stream to write to (default: standard output).
        interval: seconds between plain lines when not on a terminal.
        refresh_per_second: redraw rate on a terminal.
    """

    def __init__(
        self, file: IO[str] | None = None, interval: float = 10.0, refresh_per_second: float = 4.0
    ) -> None:
        self.file = file
        self.interval = interval
        self.refresh_per_second = refresh_per_second
        self._view: _ProgressView | None = None
        self._display: LiveOrPlain | None = None

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start the display for this epoch."""
        if not trainer.is_main_process:
            return
        self._close(final=False)  # a display left over from an interrupted epoch
        self._view = view = _ProgressView(trainer, trainer.batches_in_epoch, "train")
        self._display = LiveOrPlain(
            view,
            self._print_line,
            file=self.file,
            refresh_per_second=self.refresh_per_second,
            interval=self.interval,
            name="scramjet-progress",
        )
        self._display.start()

    def _print_line(self) -> None:
        view = self._view
        if view is not None:
            print(view.text(), file=self.file or sys.stdout, flush=True)

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Stop the display and print the epoch's final line."""
        self._close(final=True)

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Make sure nothing is left running (e.g. after an early stop)."""
        self._close(final=False)

    def close(self) -> None:
        """Stop the display when a run fails with an exception."""
        self._close(final=False)

    def _close(self, final: bool) -> None:
        display, self._display = self._display, None
        if display is not None:
            display.stop()
            if final and not display.live:  # a live display has drawn its last frame
                self._print_line()
        self._view = None
