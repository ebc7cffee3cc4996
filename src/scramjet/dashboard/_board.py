"""The Dashboard: a read-only Trainer callback and a standalone ``gauge()``/``log()`` tool."""

from __future__ import annotations

import atexit
import collections
import math
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import torch

from scramjet.callbacks._display import LiveOrPlain
from scramjet.callbacks.base import TrainerCallback
from scramjet.callbacks.control import epochs_in_history
from scramjet.dashboard import _files
from scramjet.dashboard._plot import check_span
from scramjet.dashboard._values import (
    as_float,
    as_numbers,
    check_format,
    check_stage,
    entry_values,
    integral,
)
from scramjet.dashboard._view import (
    LiveView,
    Snapshot,
    StageView,
    memory_text,
    plain_lines,
)
from scramjet.runtime.files import atomic_write_bytes
from scramjet.trainer.data_order import safe_len

if TYPE_CHECKING:
    from scramjet.trainer import Trainer

#: Batches the first epoch of training data without a length is assumed to hold, until it
#: holds more (the guess then doubles); the next epochs start from the last one's length.
_FIRST_GUESS = 64

#: A recorded step waiting to be turned into numbers: ``(stage, {name: value}, point)``,
#: ``point`` being ``(x, step, epoch, mile)`` when the values are also curve points.
_Queued = tuple[str, dict[str, Any], tuple[float, int, int, int] | None]


@dataclass
class _Stage:
    """Counters of one stage; written by the loop thread, read by the display thread."""

    name: str
    epoch: int = 0
    epochs: int | None = None
    # Epochs of earlier runs that the run history counts (``reset_run_history=False``):
    # added to the epoch shown, so the row numbers epochs as the metric lines do.
    shift: int = 0
    done: int = 0
    total: int | None = None
    samples: int = 0
    has_samples: bool = False
    started: float = field(default_factory=time.perf_counter)
    busy: float = 0.0  # sum of the ``duration`` values given to gauge(), if any
    finished: bool = False
    ended: float | None = None  # perf_counter() when the epoch of the stage finished
    # (done, samples) read at snapshot time, for the Trainer's own counters.
    probe: Callable[[], tuple[int, int]] | None = None
    base: tuple[int, int] = (0, 0)
    # (steps, samples) gauged by the call that opened the stage: gauge() runs after a
    # step, so that step finished before the clock started and is not in the rate.
    untimed: tuple[int, int] = (0, 0)


class Dashboard(TrainerCallback):
    """A live terminal dashboard: progress per stage, metrics, memory and line curves.

    Use it as a Trainer callback (``Trainer(..., callbacks=[Dashboard()])``), or on its own
    with nebulae's calls ``gauge(entry, mile, epoch, mpe, stage)`` and ``log()``.

    On a terminal it is drawn with ``rich.live`` and redrawn by rich's timer thread
    (``refresh_per_second``), never by the training loop; elsewhere (CI, a file) it
    prints one plain line per stage every ``print_every`` seconds and when an epoch
    ends. Only rank 0 of a distributed run displays or writes anything.

    As a Trainer callback it reads the trainer's counters from the display thread, keeps
    each step's loss as a detached tensor (read by the display thread, one copy per redraw)
    and reads epoch metrics from ``trainer.run_history``. It changes nothing in training.

    Args:
        log_path: Folder for :meth:`log` (CSV and PNG per metric, record files).
        window: Moving-average window of the curves.
        divisor: Number of rows the y axis of a curve is divided into.
        span: Width of the x axis of a curve, in steps (an int from 2 to 10,000; a
            terminal narrower than that shows the newest points that fit).
        format: ``{metric: (kind, arg)}`` with kind ``"raw"`` (arg: a format spec such as
            ``".4f"``), ``"percent"`` (value × 100, arg: spec), ``"tailor"`` (arg: a
            function value -> str) or ``"inviz"`` (recorded, not shown).
        curves: Metrics to plot (default: every recorded metric).
        file: Stream to draw on (default: standard output).
        refresh_per_second: Redraw rate on a terminal.
        print_every: Seconds between plain lines when the stream is not a terminal.
        force_terminal: Override terminal detection (True: always draw with control codes).
        show_memory: Show the CPU/GPU memory line.

    Example:
        >>> import io
        >>> board = Dashboard(file=io.StringIO(), show_memory=False)
        >>> board.gauge({"loss": 0.5}, mile=0, epoch=0, mpe=2, stage="train", duration=0.1)
        >>> board.snapshot().stages[0].done
        1
        >>> board.close()
    """

    def __init__(
        self,
        log_path: str = "./aerolog",
        window: int = 1,
        divisor: int = 10,
        span: int = 30,
        format: Mapping[str, Any] | None = None,
        *,
        curves: Sequence[str] | None = None,
        file: IO[str] | None = None,
        refresh_per_second: float = 4.0,
        print_every: float = 10.0,
        force_terminal: bool | None = None,
        show_memory: bool = True,
    ) -> None:
        for name, value, low in (("window", window, 1), ("divisor", divisor, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}; received {value!r}.")
        check_span(span)
        if not refresh_per_second > 0 or not print_every > 0:
            raise ValueError(
                f"refresh_per_second and print_every must be > 0; received "
                f"{refresh_per_second!r} and {print_every!r}."
            )
        self.log_path = Path(log_path)
        self.window, self.divisor, self.span = window, divisor, span
        self.format = check_format(format)
        self.curves = None if curves is None else [str(c) for c in curves]
        self.file = file
        self.refresh_per_second = refresh_per_second
        self.print_every = print_every
        self.force_terminal = force_terminal
        self.show_memory = show_memory
        self.title = "scramjet dashboard"
        self._lock = threading.RLock()
        # Held while queued values are turned into numbers, so they are recorded in the
        # order they came; always taken before ``_lock``, never while holding it.
        self._convert_lock = threading.Lock()
        self._stages: dict[str, _Stage] = {}
        self._entries: dict[str, dict[str, Any]] = {}
        # {metric: {stage: [[x, step, epoch, mile, value], ...]}}, x = epoch progress
        # (epoch + (mile + 1) / mpe); values are floats: tensors wait in ``_incoming``
        # (gauge) or ``_pending`` (the Trainer's losses) until ``_drain`` reads them.
        self._series: dict[str, dict[str, list[list[Any]]]] = {}
        self._incoming: list[_Queued] = []
        self._pending: collections.deque[Any] = collections.deque()
        self._loss_steps = 0
        self._epoch_losses = 0
        # Batches expected in an epoch of training data without a length (see _take).
        self._unsized_len = _FIRST_GUESS
        # (metric, stage) pairs read from the run history: results, drawn as they are.
        self._as_is: set[tuple[str, str]] = set()
        # perf_counter() when an evaluation inside a training epoch began: its time is no
        # part of the training stage's rate and time left.
        self._paused_at: float | None = None
        self._train_unread = False  # the train stage ended; its epoch metrics not read yet
        self._trainer: Trainer | None = None
        self._display: LiveOrPlain | None = None
        self._started = False
        self._active = False  # True during a Trainer run on rank 0: per-step losses are queued
        self._printed: dict[str, tuple[float, int, bool]] = {}  # stage: (began, done, finished)
        self._failed_formats: set[str] = set()  # tailor functions that raised (warned once)
        # Added to a Trainer run's epochs on the x axis, so that a second train() call
        # (a fine-tuning phase) continues the curves instead of overlaying the first.
        self._x_offset = 0

    # ------------------------------------------------------------------ nebulae calls
    def gauge(
        self,
        entry: Mapping[str, Any],
        mile: int,
        epoch: int,
        mpe: int,
        stage: str,
        interval: int = 1,
        duration: float | None = None,
        *,
        samples: int | None = None,
    ) -> None:
        """Record one step (or epoch) of ``stage`` and its metric values.

        Args:
            entry: ``{name: value}``; numbers or one-element tensors (kept as they are,
                so no device sync here; the display thread reads each tensor once, with
                one copy per device for all the values queued since its last redraw).
            mile: 0-based step within the epoch.
            epoch: 0-based epoch (shown 1-based).
            mpe: Steps per epoch (miles per epoch).
            stage: Stage name, e.g. ``"train"`` or ``"test"``.
            interval: Keep a curve point every ``interval`` steps (and the last step of
                each epoch); the screen refreshes on its own timer either way.
            duration: Seconds this step took; throughput then uses the sum of these
                instead of the wall clock.
            samples: Samples in this step; throughput is then in samples/s, else steps/s.
        """
        if not integral(mpe) or mpe < 1 or not integral(mile) or not 0 <= mile < mpe:
            raise ValueError(
                f"gauge() needs int 0 <= mile < mpe and int mpe >= 1; received mile={mile!r}, "
                f"mpe={mpe!r}. Pass the 0-based step and the number of steps per epoch."
            )
        if not integral(interval) or interval < 1:
            raise ValueError(f"interval must be an int >= 1; received {interval!r}.")
        if not integral(epoch) or epoch < 0:
            raise ValueError(f"gauge() needs an int epoch >= 0 (0-based); received {epoch!r}.")
        check_stage(stage)
        # NumPy integers (np.arange loops) count as ints; stored as Python ints.
        mile, epoch, mpe, interval = int(mile), int(epoch), int(mpe), int(interval)
        free = [k for k, (kind, _) in self.format.items() if kind in ("tailor", "inviz")]
        values = entry_values(entry, free)  # checked before anything is recorded
        if not _is_main_process():
            return
        with self._lock:
            st = self._stages.get(stage)
            opened = st is None or st.epoch != epoch or mile < st.done - 1 or st.finished
            if opened:
                st = self._stages[stage] = _Stage(stage, epoch=epoch)
            assert st is not None
            st.done, st.total = mile + 1, mpe
            st.finished = mile + 1 >= mpe
            if st.finished:
                st.ended = time.perf_counter()
            if duration is not None:
                st.busy += float(duration)
            if samples is not None:
                st.samples += int(samples)
                st.has_samples = True
            if opened:
                st.untimed = (st.done, st.samples)
            point = None
            if mile % interval == 0 or st.finished:
                point = (epoch + (mile + 1) / mpe, epoch * mpe + mile + 1, epoch, mile)
            self._incoming.append((stage, values, point))
        self._start()
        if st.finished and self._prints_plain:
            self._print_plain([stage])

    def log(self, gauge: bool = True, tachograph: bool = True, record: str | None = None) -> None:
        """Write what was recorded into ``log_path`` (rank 0 only).

        Args:
            gauge: Write ``<metric>.png``: a line plot of each metric, one line per stage.
            tachograph: Write ``<metric>.csv`` with columns ``stage,epoch,mile,step,value``.
            record: A file name (inside ``log_path`` unless absolute) to which one line per
                stage with the latest values is appended.
        """
        if not _is_main_process():
            return
        self._drain()
        with self._lock:
            series = {
                m: {
                    s: [
                        (float(r[0]), int(r[1]), int(r[2]), int(r[3]), as_float(r[4])) for r in rows
                    ]
                    for s, rows in by_stage.items()
                }
                for m, by_stage in self._series.items()
            }
            snap = self._snapshot_locked()
            as_is = set(self._as_is)
        if series and (gauge or tachograph):
            self.log_path.mkdir(parents=True, exist_ok=True)
        for metric, stem in _files.file_stems(series).items():  # distinct names, no clash
            by_stage, base = series[metric], str(self.log_path / stem)
            if tachograph:
                atomic_write_bytes(Path(base + ".csv"), _files.csv_bytes(by_stage))
            if gauge:
                raw = {stage for name, stage in as_is if name == metric}
                png = _files.png_bytes(metric, by_stage, self.window, raw)
                atomic_write_bytes(Path(base + ".png"), png)
        if record:
            stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
            lines = [f"{stamp} {line}" for line in plain_lines(snap)]
            path = Path(record)
            _files.append_record(path if path.is_absolute() else self.log_path / path, lines)

    # ------------------------------------------------------------------ display
    def snapshot(self) -> Snapshot:
        """What the dashboard would draw now (also used by the display thread)."""
        self._drain()
        with self._lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> Snapshot:
        now = time.perf_counter()
        stages = [self._stage_view(st, now) for st in self._stages.values()]
        metrics = {
            stage: {k: text for k, v in values.items() if (text := self._fmt(k, v)) is not None}
            for stage, values in self._entries.items()
        }
        # Only the points a curve can show (plus the moving-average lead-in) are copied,
        # so a refresh costs the same at step 100 and at step 1,000,000.
        tail = self.span + self.window
        if self.curves is not None:
            names = self.curves
        else:
            names = [m for m in self._series if self.format.get(m, ("raw",))[0] != "inviz"]
        # A chosen curve without values yet is kept (empty): the screen says so, naming
        # the curves that have values, so a misspelt name is not just a missing plot.
        curves = {
            m: {
                s: [(float(r[0]), as_float(r[4])) for r in rows[-tail:]]
                for s, rows in self._series.get(m, {}).items()
            }
            for m in names
        }
        return Snapshot(
            title=self.title,
            stages=stages,
            metrics=metrics,
            curves=curves,
            memory=memory_text() if self.show_memory else "",
            span=self.span,
            divisor=self.divisor,
            window=self.window,
            recorded=tuple(self._series),
            as_is=frozenset(self._as_is),
        )

    def _stage_view(self, st: _Stage, now: float) -> StageView:
        if st.probe is not None:
            d, s = st.probe()
            st.done, st.samples = d, s - st.base[1]
        end = st.ended if st.ended is not None else now
        steps, samples = st.done - st.base[0], st.samples
        if st.busy > 0:  # the durations given to gauge() time every step
            elapsed = st.busy
        else:  # the wall clock since the stage opened, which excludes the steps before it
            elapsed = max(end - st.started, 1e-9)
            steps, samples = steps - st.untimed[0], samples - st.untimed[1]
        work = samples if st.has_samples else steps
        rate = work / elapsed if work else math.nan
        steps_rate = steps / elapsed if steps else 0.0
        left = (st.total - st.done) if st.total else None
        eta = left / steps_rate if left is not None and steps_rate > 0 else math.nan
        return StageView(
            name=st.name,
            epoch=st.epoch + st.shift,
            epochs=st.epochs,
            done=st.done,
            total=st.total,
            rate=rate,
            unit="samples/s" if st.has_samples else "steps/s",
            eta=0.0 if st.finished else eta,
            finished=st.finished,
        )

    def _fmt(self, name: str, value: Any) -> str | None:
        kind, arg = self.format.get(name, ("raw", None))
        if kind == "inviz":
            return None
        if kind == "tailor":
            # A tensor (kept as given, unsynced) reaches the function as a number.
            number = as_float(value) if hasattr(value, "item") else value
            try:
                return str(arg(number))
            except Exception as error:  # the display never stops the training loop
                if name not in self._failed_formats:
                    self._failed_formats.add(name)
                    warnings.warn(
                        f"Dashboard: format[{name!r}]'s tailor function raised "
                        f"{type(error).__name__}: {error} for the value {number!r}; the "
                        "value is shown as a number instead.",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                kind, arg = "raw", None
        number = as_float(value)
        if kind == "percent":
            return f"{number * 100:{arg or '.2f'}}%"
        if isinstance(value, str):
            return value
        return f"{number:{arg or '.4g'}}"

    def _start(self) -> None:
        if self._started or not _is_main_process():
            return
        self._started = True
        self._display = LiveOrPlain(
            LiveView(self.snapshot, lambda: self._started),  # close(): a whole last frame
            lambda: self._print_plain(None, periodic=True),
            file=self.file,
            force_terminal=self.force_terminal,
            refresh_per_second=self.refresh_per_second,
            interval=self.print_every,
            name="scramjet-dashboard",
        )
        self._display.start()
        atexit.register(self.close)

    @property
    def _prints_plain(self) -> bool:
        """Whether the display prints plain lines (so epoch ends print one too)."""
        return self._display is not None and not self._display.live

    def _print_plain(self, stages: Sequence[str] | None, periodic: bool = False) -> None:
        """Print the line of each stage (or of ``stages``) whose count moved since its last line.

        A stage's line is never printed twice for the same count: the periodic print,
        the end of an epoch and ``close()`` (also at interpreter exit) may all ask for it.
        A periodic print skips a stage that has done all its steps but is not finished yet
        (its epoch is ending): the stage's final line follows.
        """
        self._drain()
        with self._lock:  # the display thread and the loop may both print
            snap = self._snapshot_locked()
            wanted = []
            for st in snap.stages:
                began = self._stages[st.name].started if st.name in self._stages else 0.0
                key = (began, st.done, st.finished)  # a restarted stage is a new one
                ending = periodic and not st.finished and st.done >= (st.total or st.done + 1)
                if ending or (stages is not None and st.name not in stages):
                    continue
                if self._printed.get(st.name) != key:
                    self._printed[st.name] = key
                    wanted.append(st.name)
        lines = plain_lines(snap, wanted) if wanted else []
        if lines:
            print("\n".join(lines), file=self.file or sys.stdout, flush=True)

    def close(self) -> None:
        """Stop the display (drawing or printing a last time). Safe to call twice."""
        if not self._started:
            return
        self._started = False
        atexit.unregister(self.close)
        if self._trainer is not None:  # a run that crashed (or a Ctrl-C) inside a stage:
            self._end_stages()  # its row ends there, with no time left
        display, self._display = self._display, None
        if display is not None:
            display.stop()  # a live display draws its last frame itself
            if not display.live:
                self._print_plain(None)

    def __enter__(self) -> Dashboard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ recording
    def _add_point(self, metric: str, stage: str, row: list[Any]) -> None:
        self._series.setdefault(metric, {}).setdefault(stage, []).append(row)

    def _drain(self) -> None:
        """Record what was queued (gauge() values, the loop's per-step losses) as numbers.

        Tensors are read once, all together (one copy per device), and outside ``_lock``:
        on a GPU the copy waits for the device, and gauge() must not wait with it. Call it
        without holding ``_lock``.
        """
        with self._convert_lock:
            with self._lock:
                queued = self._take()
            if not queued:
                return
            numbers = as_numbers([value for _, values, _ in queued for value in values.values()])
            with self._lock:
                self._record(queued, numbers)

    def _take(self) -> list[_Queued]:
        """Empty the queues; the loop's losses get their place on the x axis now."""
        queued, self._incoming = self._incoming, []
        pending = self._pending
        train = self._stages.get("train")
        epoch = train.epoch if train is not None else 0
        per_epoch = (train.total if train is not None else None) or 0
        if not per_epoch and self._epoch_losses + len(pending) > self._unsized_len:
            # Data without a length: its epoch is longer than thought. Its points are
            # spread again over more of the epoch, as they are once it ends (exactly).
            wanted = max(self._epoch_losses + len(pending), 2 * self._unsized_len)
            self._place_unsized_epoch(epoch, wanted)
        while pending:
            loss = pending.popleft()
            self._loss_steps += 1
            self._epoch_losses += 1
            length = per_epoch or self._unsized_len
            x = self._x_offset + epoch + self._epoch_losses / length
            point = (x, self._loss_steps, epoch, self._epoch_losses - 1)
            queued.append(("train", {"loss": loss}, point))
        return queued

    def _train_length(self) -> int:
        """Batches in the training epoch: its length, or the one assumed for a stream."""
        train = self._stages.get("train")
        return (train.total if train is not None else None) or self._unsized_len

    def _place_unsized_epoch(self, epoch: int, length: int) -> None:
        """Place the losses of ``epoch`` (training data without a length) as if it held
        ``length`` batches, so that its points stay inside the epoch on the x axis, where
        the evaluation after it is drawn. Call it holding ``_lock``."""
        start = self._x_offset + epoch
        for row in reversed(self._series.get("loss", {}).get("train", [])):
            if row[2] != epoch or row[0] <= start:  # an earlier epoch's (or run's) points
                break
            row[0] = start + (row[3] + 1) / length
        self._unsized_len = length

    def _record(self, queued: list[_Queued], numbers: list[float]) -> None:
        """Show and plot the taken values (``numbers``: their values as floats, in order)."""
        at = iter(numbers)
        for stage, values, point in queued:
            shown = self._entries.setdefault(stage, {})
            for name, value in values.items():
                number = next(at)
                shown[name] = number if isinstance(value, torch.Tensor) else value
                if point is not None and not isinstance(value, str):  # text is not plotted
                    self._add_point(name, stage, [*point, number])

    # ------------------------------------------------------------------ Trainer events
    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Start drawing (rank 0)."""
        if not trainer.is_main_process:
            return
        self._trainer = trainer
        self._active = True
        self._drain()
        with self._lock:
            last = max(
                (
                    row[0]
                    for by_stage in self._series.values()
                    for rows in by_stage.values()
                    for row in rows
                ),
                default=None,
            )
            if last is not None:  # points of an earlier run: start after them
                self._x_offset = max(0, math.ceil(last - 1e-9) - trainer.state.epoch)
        from scramjet.callbacks.progress import ProgressBarCallback

        if any(isinstance(cb, ProgressBarCallback) for cb in trainer.callbacks):
            warnings.warn(
                "Dashboard and ProgressBarCallback both draw progress on the terminal; pass "
                "callbacks without ProgressBarCallback (the Dashboard shows progress itself).",
                stacklevel=2,
            )
        self._start()

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Open the train stage for this epoch; its counters are read by the display thread."""
        if not trainer.is_main_process:
            return
        state = trainer.state
        total = trainer.batches_in_epoch  # resumed batches included; 0 when unknown
        self._drain()
        with self._lock:
            # A resumed run starts inside the epoch: its losses are placed from that batch on,
            # and a board that saw none of the run counts its steps from there too.
            self._epoch_losses = state.batches_seen_in_epoch
            if not self._loss_steps and total:
                self._loss_steps = state.epoch * total + state.batches_seen_in_epoch
            self._stages["train"] = _Stage(
                "train",
                epoch=state.epoch,
                epochs=epochs_in_history(trainer),
                shift=_earlier_epochs(trainer),
                total=total or None,
                has_samples=True,
                probe=lambda: (state.batches_seen_in_epoch, state.samples_seen),
                base=(state.batches_seen_in_epoch, state.samples_seen),
            )

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Queue this step's loss as a detached tensor (no device sync, no conversion)."""
        if self._active:  # other ranks keep nothing
            self._pending.append(kwargs["batch_output"]["loss"].detach())

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Close the train stage; its epoch metrics are read once every callback has
        logged its own for this event (at the evaluation's start or the epoch's end)."""
        if not trainer.is_main_process:
            return
        self._drain()
        self._end_train_stage()
        self._train_unread = True

    def _read_train_metrics(self, trainer: Trainer) -> None:
        """Pick up the training epoch's metrics, once, after ``on_train_epoch_end``."""
        if not self._train_unread:
            return
        self._train_unread = False
        self._read_history(trainer, "train")
        if self._prints_plain:
            self._print_plain(["train"])

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """The training metrics of an epoch without an evaluation."""
        if trainer.is_main_process:
            self._read_train_metrics(trainer)

    def _end_train_stage(self) -> None:
        """Freeze the train stage's counters: its epoch ended (or the run stopped in it)."""
        with self._lock:
            st = self._stages.get("train")
            if st is not None and st.probe is not None:
                d, s = st.probe()
                st.done, st.samples = d, s - st.base[1]
                st.probe, st.finished, st.ended = None, True, time.perf_counter()
                if not st.total and st.done:  # data without a length: now it is known
                    st.total = st.done
                    self._place_unsized_epoch(st.epoch, st.done)

    def on_stop_training_error(self, trainer: Trainer, **kwargs: Any) -> None:
        """A stop inside a stage (a NaN loss): its row shows where it ended, no time left."""
        if trainer.is_main_process:
            self._end_stages()

    def _end_stages(self) -> None:
        """Freeze every stage still running (a stop, a crash, ``close()``): each row shows
        where it ended (``ended early``), and its rate stops at that time."""
        self._drain()
        self._end_train_stage()
        now = time.perf_counter()
        with self._lock:
            for st in self._stages.values():
                if not st.finished:
                    st.finished, st.ended = True, now

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Show a standalone ``trainer.evaluate()`` (a training run's display is already on);
        in a run, the training epoch before it is complete: its metrics are read."""
        if not trainer.is_main_process:
            return
        if trainer.in_training_run:
            self._read_train_metrics(trainer)
        else:
            self._start()

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Pick up the evaluation's metrics, now that every callback has logged its own in
        ``on_eval_epoch_end``; close the display a standalone ``evaluate()`` opened."""
        if not trainer.is_main_process:
            return
        self._read_history(trainer, "eval")
        if self._prints_plain:
            self._print_plain(["eval"])
        if not trainer.in_training_run:
            self.close()

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        """Open the eval stage."""
        if not trainer.is_main_process:
            return
        # The loader being evaluated, in train(eval_dataset=...) and standalone evaluate().
        total = safe_len(trainer.current_dataloader) or None  # 0: no length (iterable data)
        with self._lock:
            train = self._stages.get("train")
            if trainer.in_training_run and train is not None and not train.finished:
                self._paused_at = time.perf_counter()
            self._stages["eval"] = _Stage(
                "eval",
                epoch=_epoch_of(trainer),
                epochs=epochs_in_history(trainer) if trainer.in_training_run else None,
                shift=_earlier_epochs(trainer),
                total=total,
                has_samples=True,
            )

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Count an evaluation batch (two integer additions)."""
        st = self._stages.get("eval")
        if st is not None:
            st.done += 1
            st.samples += int(kwargs["batch_output"]["batch_size"])

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Close the eval stage and pick up its epoch metrics."""
        if not trainer.is_main_process:
            return
        st = self._stages.get("eval")
        if st is not None:
            st.finished, st.ended = True, time.perf_counter()
            st.total = st.total or st.done
        with self._lock:
            train, paused, self._paused_at = self._stages.get("train"), self._paused_at, None
            if train is not None and paused is not None:  # the training clock goes on
                train.started += time.perf_counter() - paused

    def on_training_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        """Draw a last time and stop."""
        if trainer.is_main_process:
            self._read_train_metrics(trainer)  # a stop raised in the epoch's end
            self._drain()
            self._active = False
            self.close()
            self._trainer = None

    def _read_history(self, trainer: Trainer, stage: str) -> None:
        """Copy the latest epoch metrics of ``stage`` from the run history.

        An evaluation inside a training epoch (every N steps) is placed after the training
        steps it followed, at the step it followed; one at the end of an epoch, or a
        standalone ``evaluate()``, at the end of the epoch.
        """
        history = trainer.run_history
        self._drain()  # the losses of the steps before it are counted
        epoch = _epoch_of(trainer)
        with self._lock:
            step = self._loss_steps
            x = self._x_offset + epoch + 1.0
            train = self._stages.get("train")
            if trainer.in_training_run and train is not None and not train.finished:
                x = self._x_offset + epoch + min(self._epoch_losses / self._train_length(), 1.0)
            for full in sorted(history.get_metric_names()):
                if not full.startswith(stage + "_"):
                    continue
                values = history.get_metric_values(full)
                if not values:
                    continue
                short = full[len(stage) + 1 :]
                self._entries.setdefault(stage, {})[short] = values[-1]
                name = short.removesuffix("_epoch")
                if full in self.format:  # format= may name it as the run history does
                    for key in (short, name):
                        self.format.setdefault(key, self.format[full])
                if stage == "train" and name == "loss":
                    continue  # the per-step loss curve already covers it
                self._as_is.add((name, stage))
                self._add_point(name, stage, [x, step, epoch, 0, as_float(values[-1])])


def _epoch_of(trainer: Trainer) -> int:
    """The epoch being run, or after a run (a standalone ``evaluate()``) the last one trained.

    A run that ended normally has moved ``state.epoch`` past its last epoch; one stopped
    (early stopping, a NaN loss, a step limit) is still inside it, with batches seen.
    """
    state = trainer.state
    if trainer.in_training_run or state.batches_seen_in_epoch:
        return state.epoch
    return max(state.epoch - 1, 0)


def _earlier_epochs(trainer: Trainer) -> int:
    """Epochs of earlier runs in the run history (a ``train(reset_run_history=False)``)."""
    return max(trainer.run_history.current_epoch - 1 - trainer.state.epoch, 0)


def _is_main_process() -> bool:
    from scramjet.runtime.distributed import is_main_process

    return is_main_process()
