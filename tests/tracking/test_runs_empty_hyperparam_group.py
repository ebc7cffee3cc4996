"""A hyperparameter whose value is an empty dict (no extra settings) is listed, as
``hyperparams.json`` holds it, not dropped from ``list_runs`` and ``scramjet runs``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scramjet.tracking import Experiment, list_runs


def test_an_empty_settings_group_is_listed(tmp_path: Path) -> None:
    for extra in ({}, {"dropout": 0.1}):
        exp = Experiment("p", "empty", root=tmp_path, hyperparams={"lr": 0.1, "extra": extra})
        exp.start()
        exp.finish()
    first, second = list_runs(tmp_path)
    assert first["hyperparams"] == {"lr": 0.1, "extra": {}}
    assert second["hyperparams"] == {"lr": 0.1, "extra.dropout": 0.1}
    done = subprocess.run(
        [sys.executable, "-m", "scramjet", "runs", str(tmp_path), "--params", "extra"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "no run has a hyperparameter named 'extra'" not in done.stderr, done.stderr
