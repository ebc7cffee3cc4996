"""Finding and comparing runs after kills, resumes and sweeps: the runs table, the listing
API, the report pages and the loggers, checked against ``metrics.csv``."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.cli import main
from scramjet.tracking import Experiment, compare_runs


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


def _header_rows(page: str) -> list[list[str]]:
    """The header cells of every table of an HTML page."""
    heads = re.findall(r"<thead><tr>(.*?)</tr></thead>", page)
    return [[html.unescape(c) for c in re.findall(r"<th>(.*?)</th>", h)] for h in heads]


def test_comparing_two_copies_of_a_run_labels_each_by_where_it_is(tmp_path: Path) -> None:
    """A run copied to a second root and continued there (to compare a longer training
    with the original) has the same folder name in both places: the comparison page
    labelled both columns, and both curves, with that one name, so nobody could tell
    which column was which. Runs of the same name are now labelled by as much of their
    path as tells them apart."""
    exp = Experiment("proj", "run", root=tmp_path / "a", save_script=False)
    make_trainer([exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    copy = tmp_path / "b" / "proj" / exp.run_dir.name
    shutil.copytree(exp.run_dir, copy)
    again = Experiment("proj", "run", root=tmp_path / "b", resume=copy, save_script=False)
    make_trainer([again]).train(tiny_data(32), 2, per_device_batch_size=16)
    page = compare_runs([exp.run_dir, copy], tmp_path / "cmp.html").read_text()
    name = exp.run_dir.name
    for header in _header_rows(page):
        assert header[1:] == [f"a/proj/{name}", f"b/proj/{name}"], header
    runs_table = page[page.index("<h2>Runs</h2>") : page.index("<h2>Results</h2>")]
    assert re.findall(r"<td>epochs</td><td>(\d)</td><td>(\d)</td>", runs_table) == [("1", "2")]


def test_runs_under_a_folder_of_roots_are_pointed_to_not_reported_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sweeps kept as ``runs/sweep1/PROJECT/RUN`` (each sweep its own ``root=``) and listed
    with ``scramjet runs runs`` printed ``No runs under runs.``: nothing said that runs
    were read at ``ROOT/PROJECT/RUN`` nor that run folders lay one level down. The answer
    now names the roots found below, with their run counts, to pass instead."""
    for sweep in ("sweep1", "sweep2"):
        exp = Experiment("proj", "run", root=tmp_path / "runs" / sweep, checkpoint=None)
        make_trainer([exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    capsys.readouterr()
    assert main(["runs", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "ROOT/PROJECT/RUN" in out, out
    for sweep in ("sweep1", "sweep2"):
        assert f"{tmp_path / 'runs' / sweep} (1 run)" in out, out
    assert main(["runs", str(tmp_path / "runs" / "sweep1")]) == 0
    assert "proj/run_" in capsys.readouterr().out
