"""`scramjet runs` lists every run even when one run's files are damaged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment


def test_a_damaged_run_json_does_not_break_the_listing(tmp_path: Path) -> None:
    runs = []
    for _ in range(3):
        exp = Experiment("p", "e", root=tmp_path, log_every_n_steps=1, checkpoint=None)
        make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=16)
        runs.append(exp.run_dir)
    (runs[0] / "run.json").write_bytes(b"\xff\xfe not json")
    (runs[1] / "run.json").write_text(json.dumps([1, 2, 3]))  # valid JSON, wrong shape
    (runs[2] / "metrics.csv").write_bytes(b"\x00\x00garbage\n\x00")
    done = subprocess.run(
        [sys.executable, "-m", "scramjet.cli", "runs", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for run in runs:
        assert run.name in done.stdout
