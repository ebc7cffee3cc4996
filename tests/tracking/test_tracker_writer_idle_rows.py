"""Rows handed to the tracking thread reach the metric files within its batch interval
even when no later row arrives (a long step, a stalled loop, a process about to be
killed): they do not wait for the next put."""

from __future__ import annotations

import time
from pathlib import Path

from scramjet.tracking._writer import TrackerWriter
from scramjet.tracking.loggers.base import MetricRow
from scramjet.tracking.loggers.csv import CSVTracker, read_metrics


def _row(step: int) -> MetricRow:
    return {"scope": "step", "step": step, "epoch": 1, "time": time.time(),
            "metrics": {"train_loss": 1.0 / step}}  # fmt: skip


def test_rows_put_before_a_pause_are_written_without_a_later_put(tmp_path: Path) -> None:
    writer = TrackerWriter([CSVTracker(tmp_path)], lambda: None, batch_s=0.2)
    try:
        writer.put("metrics", [_row(1)])  # written at once: the first write
        time.sleep(0.1)
        writer.put("metrics", [_row(2), _row(3)])  # inside the interval: kept for a batch
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and len(read_metrics(tmp_path)) < 3:
            time.sleep(0.05)
        assert [row["step"] for row in read_metrics(tmp_path)] == [1, 2, 3]
    finally:
        writer.close()
