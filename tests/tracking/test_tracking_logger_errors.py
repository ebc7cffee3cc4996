"""A logger that fails during a run is said on the console when the run ends."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment, Tracker
from scramjet.tracking.loggers.base import MetricRow


class _FullDisk(Tracker):
    name = "bucket-logger"

    def __init__(self) -> None:
        self.rows = 0

    def log_metrics(self, rows: Sequence[MetricRow]) -> None:
        self.rows += len(rows)
        raise OSError(28, "No space left on device")


def test_a_failing_logger_is_warned_about_at_the_end_of_the_run(tmp_path: Path) -> None:
    """Every metric batch a logger refused was lost from it with no message: the run
    finished quietly, and only run.json's ``logger_errors`` (and a line of the report)
    said so."""
    tracker = _FullDisk()
    exp = Experiment("p", "e", root=tmp_path / "runs", loggers=("csv", tracker))
    with pytest.warns(UserWarning, match="bucket-logger") as caught:
        make_trainer([exp]).train(tiny_data(32), 2, per_device_batch_size=16)
    assert tracker.rows > 0
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "finished" and len(info["logger_errors"]) >= 2
    said = [str(w.message) for w in caught if "bucket-logger" in str(w.message)]
    assert len(said) == 1, said
    assert "No space left on device" in said[0] and str(exp.run_dir / "run.json") in said[0]
    assert f"{len(info['logger_errors'])} " in said[0]


def test_no_warning_when_every_logger_worked(
    tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    exp = Experiment("p", "ok", root=tmp_path / "runs")
    make_trainer([exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    assert not [w for w in recwarn if "logger" in str(w.message)]
