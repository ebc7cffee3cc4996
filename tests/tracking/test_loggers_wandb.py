"""Weights & Biases in offline mode, read back from the run's ``.wandb`` files (W&B's
record log: 32 KiB blocks of CRC-checked chunks holding ``wandb_internal_pb2.Record``s,
the format ``wandb sync`` uploads)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from logger_runs import csv_series, tracked_run
from wandb_records import read_finished_wandb_run


def test_wandb_offline_run_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    exp = tracked_run(tmp_path, ("csv", "wandb"))
    data = read_finished_wandb_run(exp.run_dir)
    run_id = json.loads((exp.run_dir / "run.json").read_text())["wandb_run_id"]
    assert {r for r in data["runs"]} == {(run_id, "proj", exp.run_dir.name)}
    assert data["exits"] and set(data["exits"]) == {0}

    by_step: dict[int, dict[str, Any]] = {}
    for row in data["history"]:
        by_step.setdefault(row["_step"], {}).update(row)
    csv = csv_series(exp.run_dir)
    for name, points in csv.items():
        assert {s: by_step[s][name] for s, _, _ in points} == pytest.approx(
            {s: v for s, v, _ in points}
        ), name
    step_times = {s: t for s, _, t in csv["train_loss"]}
    for step in (1, 2, 3, 4, 5):  # steps without an epoch row: the step's own time
        assert by_step[step]["_timestamp"] == pytest.approx(step_times[step], abs=2e-3)
    assert by_step[6]["epoch"] == 1 and by_step[12]["epoch"] == 2

    config = data["config"]
    assert config["lr"] == 0.2 and config["optimizer"] == "SGD" and config["batch_size"] == 16
    assert "is_local_process_zero" not in config
    # lists and None as W&B keeps them (runs filter and group by them), not their text
    assert config["layers"] == [16, 8] and config["seed"] is None
    assert data["summary"]["test/accuracy"] == 0.75
    assert data["summary"]["test/per_class/a"] == 0.5
    assert {"report.html", "results/test.json", "model/model.pt"} <= data["files"]
