"""Finding and comparing runs after kills, resumes and sweeps: the runs table, the listing
API, the report pages and the loggers, checked against ``metrics.csv``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment


def _dead_pid() -> int:
    """The pid of a process that has ended (what ``run.json`` holds after a ``kill -9``)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _as_if_killed(run: Path, seconds_ago: float) -> None:
    """Make a finished run look as a ``kill -9`` leaves it, ``seconds_ago`` after its last
    write: ``running``, no end, its process gone, its files last written back then."""
    info = json.loads((run / "run.json").read_text())
    for key in ("ended", "finished", "duration"):
        info.pop(key)
    past = time.time() - seconds_ago
    info.update(status="running", pid=_dead_pid(), started=past - 1, session_started=past - 1)
    (run / "run.json").write_text(json.dumps(info))
    for name in ("metrics.csv", "run.json"):
        os.utime(run / name, (past, past))


def test_a_killed_run_resumed_with_mlflow_does_not_count_the_wait_as_training_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed with ``kill -9`` and resumed 60 s later with the MLflow logger had a
    ``duration`` of more than 60 s: opening the logger rewrote ``run.json`` (its run id)
    before the end of the killed session was read from the file's time, so the wait
    counted as training. Without MLflow the same resume gave the time the run trained."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    loggers = ("csv", "mlflow")
    first = Experiment("proj", "k", root=tmp_path / "runs", loggers=loggers, save_script=False)
    make_trainer([first]).train(tiny_data(32), 1, per_device_batch_size=16)
    _as_if_killed(first.run_dir, seconds_ago=60.0)
    begun = time.time()
    again = Experiment(
        "proj", "k", root=tmp_path / "runs", loggers=loggers, resume="latest", save_script=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLflow keeps num_epochs 1: said in a warning
        make_trainer([again]).train(tiny_data(32), 2, per_device_batch_size=16)
    assert again.run_dir == first.run_dir
    info = json.loads((again.run_dir / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["duration"] < time.time() - begun + 5.0, info
