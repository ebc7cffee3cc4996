"""The background thread that feeds metric rows (and the other Tracker calls) to the loggers."""

from __future__ import annotations

import queue
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scramjet.tracking._files import read_json, write_json
from scramjet.tracking.loggers.base import Tracker


class TrackerWriter:
    """Background thread that feeds metric rows to the trackers, off the training loop.

    Rows are handed to the trackers in batches, at most once per ``batch_s`` seconds
    (and before any other message: an epoch's ``sync``, a ``truncate``, closing), so the
    metric files are appended about once per epoch rather than every few steps. A batch
    goes out in chunks of ``chunk`` rows with a GIL release between them: a thread that
    holds the GIL keeps a waiting training loop out for up to Python's switch interval
    (5 ms), so a second's worth of step rows written in one go would stall a step.
    """

    chunk = 32

    def __init__(
        self, trackers: list[Tracker], after_write: Callable[[], None], batch_s: float = 1.0
    ) -> None:
        self.trackers = trackers
        self.after_write = after_write
        self.batch_s = batch_s
        self.errors: list[str] = []
        self._rows: list[Any] = []
        self._last_write = time.monotonic()
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="scramjet-tracking", daemon=True)
        self._thread.start()

    def put(self, kind: str, payload: Any) -> None:
        self._queue.put((kind, payload))

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until every row put so far has been handed to the trackers."""
        done = threading.Event()
        self._queue.put(("flush", done))
        done.wait(timeout)

    def _call(self, kind: str, payload: Any) -> None:
        dispatch(self.trackers, kind, payload, self.errors)

    def _write_rows(self) -> None:
        rows: list[Any]
        rows, self._rows = self._rows, []
        self._last_write = time.monotonic()
        for start in range(0, len(rows), self.chunk):
            self._call("metrics", rows[start : start + self.chunk])
            time.sleep(0)  # let the training loop take the GIL between chunks

    def _next(self) -> tuple[str, Any] | None:
        """The next message; rows kept for a batch are written once ``batch_s`` has passed
        since the last write, whether or not another message came (a long step, a stalled
        loop or a process about to be killed would otherwise keep them)."""
        while self._rows:
            wait = self.batch_s - (time.monotonic() - self._last_write)
            try:
                return self._queue.get(timeout=max(wait, 0.0))
            except queue.Empty:
                self._write_rows()
        return self._queue.get()

    def _run(self) -> None:
        while True:
            item = self._next()
            try:
                if item is None:
                    self._write_rows()
                    return
                kind, payload = item
                if kind == "metrics":
                    self._rows.extend(payload)
                    if time.monotonic() - self._last_write >= self.batch_s:
                        self._write_rows()
                    continue
                self._write_rows()  # everything before this message goes first
                if kind == "flush":
                    payload.set()
                    continue
                self._call(kind, payload)
                if kind == "sync":
                    self.after_write()
            finally:
                self._queue.task_done()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=60)
        dispatch(self.trackers, "close", None, self.errors)


def dispatch(trackers: list[Tracker], kind: str, payload: Any, errors: list[str]) -> None:
    """Call one Tracker method on every tracker; a failing backend is noted in ``errors``
    (it must not stop training or the other backends)."""
    for tracker in trackers:
        try:
            if kind == "metrics":
                tracker.log_metrics(payload)
            elif kind == "hyperparams":
                tracker.log_hyperparams(payload)
            elif kind == "truncate":
                tracker.truncate(*payload)
            elif kind == "results":
                tracker.log_results(*payload)
            elif kind == "artifacts":
                tracker.log_artifacts(*payload)
            elif kind == "status":
                tracker.set_status(payload)
            elif kind == "close":
                tracker.close()
            elif kind == "reopen":
                tracker.reopen_removed_files()
        except Exception as exc:
            errors.append(f"{tracker.name}: {kind}: {type(exc).__name__}: {exc}")


def record_tracker_errors(run_json: Path, errors: list[str]) -> dict[str, Any]:
    """Add the loggers' ``errors`` to ``run.json`` as ``logger_errors`` and say them in one
    warning: a logger lost what it was sent when it failed, while training and the other
    loggers carried on. Returns ``run.json``'s new content."""
    found = read_json(run_json)
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    info["logger_errors"] = list(errors)
    write_json(run_json, info)
    loggers = sorted({error.split(":", 1)[0] for error in errors})
    warnings.warn(
        f"{len(errors)} logger error(s) during the run, from {', '.join(loggers)}: each lost "
        f"what it was sent when it failed (training, metrics.csv and the other loggers "
        f"carried on). First: {errors[0]}. All are listed as 'logger_errors' in {run_json}.",
        UserWarning,
        stacklevel=3,
    )
    return info
