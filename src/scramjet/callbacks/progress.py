"""Callbacks that report progress: metric lines, a progress bar, plain progress prints."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from scramjet.callbacks._display import LiveOrPlain
from scramjet.callbacks.base import TrainerCallback
from scramjet.callbacks.control import epochs_in_history

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


_BAR_WIDTH = 30


class _RunningLoss:
    """Per-sample mean of the losses recorded so far in an epoch, read from the display thread.

    ``source`` returns the trainer's :class:`~scramjet.trainer.state.EpochLosses` (its
    ``losses`` and ``counts`` lists). Only the batches added since the previous read are
    turned into numbers, so a refresh costs the same at batch 10 and at batch 100,000,
    and the training loop never waits for it.
    """

    def __init__(self, source: Callable[[], Any]) -> None:
        self._source = source
        self._list: Any = None
        self._read = 0
        self._total = 0.0
        self.batches = 0
        self.samples = 0

    def update(self) -> None:
        """Take in the batches recorded since the last call."""
        try:
            record = self._source()
            losses, counts = record.losses, record.counts
        except AttributeError:  # a trainer without per-batch losses: show no loss
            return
        if losses is not self._list:  # a new epoch (or run) replaced the lists
            self._list, self._read, self._total, self.batches, self.samples = losses, 0, 0.0, 0, 0
        end = min(len(losses), len(counts))
        if end <= self._read:
            return
        new_counts = [int(c) for c in counts[self._read : end]]
        values = _as_floats(losses[self._read : end])
        if values is None:
            return
        self._total += sum(v * c for v, c in zip(values, new_counts))
        self.samples += sum(new_counts)
        self.batches, self._read = end, end

    @property
    def mean(self) -> float | None:
        """The per-sample mean so far (None before the first batch; NaN once a loss was)."""
        return self._total / self.samples if self.samples else None


def _as_floats(tensors: list[Any]) -> list[float] | None:
    """Numbers from detached loss tensors: one transfer when they share a device."""
    try:
        import torch

        if len({t.device for t in tensors}) == 1:
            values: list[float] = torch.stack([t.float().reshape(()) for t in tensors]).tolist()
            return values
        return [float(t) for t in tensors]
    except (RuntimeError, TypeError, ValueError):  # a display must never break training
        return None


def _positive_number(value: Any) -> bool:
    """A real number > 0 (a bool, a string or NaN is not): a display period."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and value > 0


def _duration(seconds: float) -> str:
    """``42s``, ``3:07`` or ``1:02:05``; ``--`` when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "--"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}"
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class _ProgressView:
    """What the bar shows for one stage (``train`` or ``eval``) of one epoch.

    It reads the trainer's counters and recorded losses whenever the display refreshes
    (a few times per second, on the display thread); the loop does nothing for it.
    """

    def __init__(self, trainer: Trainer, total: int, stage: str) -> None:
        self.trainer, self.total, self.stage = trainer, total, stage
        self.start = self._paused_at = time.perf_counter()
        state = trainer.state
        self.start_done = state.batches_seen_in_epoch if stage == "train" else 0
        self.start_samples = state.samples_seen if stage == "train" else 0
        if trainer.in_training_run and trainer.has_run_config:
            epoch = trainer.run_history.current_epoch
            self.head = f"epoch {epoch}/{epochs_in_history(trainer)} {stage}"
        else:  # a standalone evaluate(): no epoch to count
            self.head = stage
        record = "train_losses" if stage == "train" else "eval_losses"
        self.loss = _RunningLoss(lambda: getattr(trainer, record))
        #: the epoch's loss as recorded in the run history (reduced over all processes),
        #: shown by the last line instead of this process's running mean; set by `finish`
        self.epoch_loss: float | None = None
        self._metric = "train_loss_epoch" if stage == "train" else "eval_loss_epoch"
        self._metric_count = self._count_values()
        #: batches done when the last plain line was printed (no line is printed twice)
        self.printed: int | None = None
        #: the stage is over: its last line has no time left to give
        self.ended = False

    def snapshot(self) -> tuple[int, float, float, float | None]:
        """``(batches done, samples/s, seconds left, running loss)``."""
        self.loss.update()
        state = self.trainer.state
        if self.stage == "train":
            done, samples = state.batches_seen_in_epoch, state.samples_seen - self.start_samples
        else:
            done, samples = self.loss.batches, self.loss.samples
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        rate_b = (done - self.start_done) / elapsed
        eta = (self.total - done) / rate_b if rate_b > 0 and self.total else math.nan
        loss = self.loss.mean
        if self.ended and self.epoch_loss is not None:
            loss = self.epoch_loss
        return done, samples / elapsed, eta, loss

    def pause(self) -> None:
        """An evaluation runs inside this stage: its time is no part of this stage's rate."""
        self._paused_at = time.perf_counter()

    def resume(self) -> None:
        self.start += time.perf_counter() - self._paused_at

    def _count_values(self) -> int:
        try:
            return len(self.trainer.run_history.get_metric_values(self._metric))
        except (AttributeError, KeyError):
            return 0

    def finish(self) -> None:
        """The stage is over: its last line shows no time left and the recorded epoch loss."""
        if self._count_values() > self._metric_count:  # this epoch recorded its loss
            try:
                self.epoch_loss = float(self.trainer.run_history.get_latest_metric(self._metric))
            except (TypeError, ValueError, RuntimeError):
                self.epoch_loss = None
        self.ended = True

    def text(self) -> str:
        """One line: ``epoch 2/5 train 37/128 | loss 0.412 | 1,234 samples/s | ETA 3s``."""
        return self._text(*self.snapshot())

    def _text(self, done: int, samples: float, eta: float, loss: float | None) -> str:
        count = f"{done}/{self.total}" if self.total else f"{done} batches"
        parts = [f"{self.head} {count}"]
        if loss is not None:  # a NaN or infinite loss is shown as such: the run diverged
            parts.append(f"loss {_format_value(loss)}")
        parts.append(f"{samples:,.0f} samples/s")
        if self.ended and self.total and done < self.total:
            parts.append("ended early")  # end_epoch(), a step limit, a stop
        elif self.total:  # unknown length (an iterable): a running count, no total, no ETA
            parts.append(f"ETA {_duration(0.0 if self.ended else eta)}")
        return " | ".join(parts)

    def plain_line(self) -> str | None:
        """The text to print off a terminal, or None when this count was printed already."""
        snap = self.snapshot()
        if snap[0] == self.printed:
            return None
        self.printed = snap[0]
        return self._text(*snap)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        snap = self.snapshot()
        text = self._text(*snap)
        line = Text(no_wrap=True, overflow="ellipsis")  # one line, however narrow
        # The bar takes what the text leaves of the width (at most 30 columns), or nothing.
        width = min(_BAR_WIDTH, options.max_width - len(text) - 1)
        if self.total and width >= 8:
            filled = min(width, round(width * snap[0] / self.total))
            line.append("━" * filled, style="green")
            line.append("━" * (width - filled), style="grey23")
            line.append(" ")
        line.append(text)
        yield line


class ProgressBarCallback(TrainerCallback):
    """A progress bar for each training epoch and each evaluation.

    It shows ``epoch n/N``, the batch count (``done/total``; a running count when the
    data has no length), the running loss of the epoch (this process's per-sample mean so
    far; ``nan``/``inf`` once a loss was), throughput in samples/s and the time left. The
    last line of a stage shows the ``train_loss_epoch`` / ``eval_loss_epoch`` it recorded
    (the mean over all processes), and ``ended early`` when a stop, a step limit or
    ``end_epoch()`` cut it short. An evaluation gets its own bar, so the screen never
    sits on a finished training bar while the model is evaluated.

    On a terminal it is drawn with ``rich.live`` and refreshed by rich's timer thread;
    when output is not a terminal (CI logs, files, ``TERM=dumb``) it prints a plain line
    every ``interval`` seconds and one final line per stage (never the same count twice).
    Either way the training loop does no per-step work for it: the display thread reads
    the trainer's counters and recorded losses.

    Args:
        file: stream to write to (default: standard output).
        interval: seconds between plain lines when not on a terminal.
        refresh_per_second: redraw rate on a terminal.
    """

    def __init__(
        self, file: IO[str] | None = None, interval: float = 10.0, refresh_per_second: float = 4.0
    ) -> None:
        for name, value in (("interval", interval), ("refresh_per_second", refresh_per_second)):
            if not _positive_number(value):
                raise ValueError(
                    f"ProgressBarCallback's {name} must be a number > 0; received {value!r}. "
                    f"Pass seconds between plain lines as interval (10 by default) and "
                    f"redraws per second as refresh_per_second (4 by default)."
                )
        self.file = file
        self.interval = interval
        self.refresh_per_second = refresh_per_second
        self._view: _ProgressView | None = None
        self._display: LiveOrPlain | None = None
        self._paused: _ProgressView | None = None  # a train bar waiting for an evaluation

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start the training bar of this epoch."""
        if not trainer.is_main_process:
            return
        self._close(final=False)  # a display left over from an interrupted epoch
        self._paused = None
        self._show(_ProgressView(trainer, trainer.batches_in_epoch, "train"))

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Stop the training bar and print the epoch's final line."""
        self._close(final=True)
        self._paused = None

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start the evaluation bar (pausing a training bar during a mid-epoch evaluation)."""
        if not trainer.is_main_process:
            return
        from scramjet.trainer.data_order import safe_len

        if self._view is not None and self._view.stage == "train":
            self._paused = self._view
            self._paused.pause()
        self._close(final=False)
        label = trainer.eval_label
        self._show(_ProgressView(trainer, safe_len(trainer.current_dataloader), label))

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Stop the evaluation bar, print its final line, resume a paused training bar."""
        self._close(final=True)
        paused, self._paused = self._paused, None
        if paused is not None and trainer.is_main_process:
            paused.resume()
            self._show(paused)

    def _show(self, view: _ProgressView) -> None:
        self._view = view
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
        line = view.plain_line() if view is not None else None
        if line is not None:
            print(line, file=self.file or sys.stdout, flush=True)

    def on_stop_training_error(self, trainer: Trainer, **kwargs: Any) -> None:
        """A stop in the middle of a stage (a NaN loss): its last line shows where it stopped."""
        self._close(final=True)
        self._paused = None

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Make sure nothing is left running (e.g. after an early stop)."""
        self._close(final=False)
        self._paused = None

    def close(self) -> None:
        """Stop the display when a run fails with an exception: its last line (printed off a
        terminal too) says where the stage stopped, ``ended early``."""
        self._close(final=True)
        self._paused = None

    def _close(self, final: bool) -> None:
        display, self._display = self._display, None
        if final and self._view is not None:
            self._view.finish()  # the last frame or line shows no time left
        if display is not None:
            display.stop()
            if final and not display.live:  # a live display has drawn its last frame
                self._print_line()
        self._view = None
