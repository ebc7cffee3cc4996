"""``scramjet report`` orders the runs it is given by start time, as ``scramjet runs``
lists them: ``scramjet report runs/proj/*`` used the shell's alphabetical order, so the
comparison's columns and legends disagreed with the listing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.cli import main
from scramjet.tracking import Experiment


def _run(root: Path, name: str) -> Path:
    exp = Experiment("proj", name, root=root, checkpoint=None, save_script=False)
    make_trainer([exp]).train(tiny_data(16), 1, per_device_batch_size=16)
    return exp.run_dir


def _set_started(run: Path, started: float) -> None:
    info = json.loads((run / "run.json").read_text())
    info["started"] = started
    (run / "run.json").write_text(json.dumps(info))


def test_report_orders_runs_by_start_time_as_runs_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zeta, alpha, mid = _run(tmp_path, "zeta"), _run(tmp_path, "alpha"), _run(tmp_path, "mid")
    for run, started in ((zeta, 1000.0), (alpha, 3000.0), (mid, 2000.0)):
        _set_started(run, started)
    capsys.readouterr()
    assert main(["runs", str(tmp_path)]) == 0
    listed = re.findall(r"proj/(\w+?)_", capsys.readouterr().out)
    assert listed == ["zeta", "mid", "alpha"], listed
    glob_order = sorted((tmp_path / "proj").iterdir())  # as the shell expands proj/*
    out = tmp_path / "cmp.html"
    assert main(["report", *map(str, glob_order), "-o", str(out)]) == 0
    reports = re.findall(r"report: .*proj/(\w+?)_", capsys.readouterr().out)
    assert reports == listed, reports
    header = out.read_text(encoding="utf-8").split("<h2>Runs</h2>")[1].split("</tr>")[0]
    columns = re.findall(r"(zeta|mid|alpha)_", header)
    assert columns == listed, columns
