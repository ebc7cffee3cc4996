"""A run made with an Experiment and no ``train()`` (results of an evaluation logged with
``log_results``) says in ``run.json`` what it is and when it ran, as a trained run does."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

from scramjet.tracking import Experiment, list_runs


def test_a_run_without_training_records_its_names_and_times(tmp_path: Path) -> None:
    before = time.time()
    exp = Experiment("proj", "eval-only", root=tmp_path, checkpoint=None)
    exp.start()
    exp.log_results("test", {"accuracy": 0.75})
    exp.finish()
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["project"] == "proj" and info["experiment"] == "eval-only"
    assert before - 1 <= info["started"] <= info["ended"] <= time.time() + 1
    (run,) = list_runs(tmp_path)
    assert run["experiment"] == "eval-only"
    assert isinstance(run["started"], dt.datetime) and run["duration_s"] is not None
    listing = subprocess.run(
        [sys.executable, "-m", "scramjet", "runs", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert run["started"].strftime("%Y-%m-%d") in listing, listing
