"""Weights & Biases in offline mode, read back from the run's ``.wandb`` files (W&B's
record log: 32 KiB blocks of CRC-checked chunks holding ``wandb_internal_pb2.Record``s,
the format ``wandb sync`` uploads)."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from logger_runs import csv_series, tracked_run

_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "a W&B record log"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        if _BLOCK - pos % _BLOCK < 7:  # a block's tail too short for a header is padding
            pos += _BLOCK - pos % _BLOCK
            continue
        checksum, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) == checksum, "a damaged chunk"
        if kind == _FULL:
            yield wandb_internal_pb2.Record.FromString(chunk)
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield wandb_internal_pb2.Record.FromString(pending + chunk)
            pending = b""


def _key(item: Any) -> str:
    return str(item.key or "/".join(item.nested_key))


def _read_run(run_dir: Path) -> dict[str, Any]:
    """History rows, config, summary, run identity, saved files and exit codes of every
    offline run folder W&B wrote for this run (results logged after the run continue it)."""
    out: dict[str, Any] = {"history": [], "config": {}, "summary": {}, "files": set()}
    out["exits"], out["runs"] = [], []
    for log in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        for record in _records(log):
            kind = record.WhichOneof("record_type")
            if kind == "history":
                out["history"].append(
                    {_key(item): json.loads(item.value_json) for item in record.history.item}
                )
            elif kind == "run":
                run = record.run
                out["runs"].append((run.run_id, run.project, run.display_name))
                out["config"].update({u.key: json.loads(u.value_json) for u in run.config.update})
            elif kind == "config":
                out["config"].update(
                    {u.key: json.loads(u.value_json) for u in record.config.update}
                )
            elif kind == "summary":
                for u in record.summary.update:
                    out["summary"][_key(u)] = json.loads(u.value_json)
            elif kind == "files":
                out["files"].update(f.path for f in record.files.files)
            elif kind == "exit":
                out["exits"].append(record.exit.exit_code)
    return out


def test_wandb_offline_run_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    exp = tracked_run(tmp_path, ("csv", "wandb"))
    data = _read_run(exp.run_dir)
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
    assert data["summary"]["test/accuracy"] == 0.75
    assert data["summary"]["test/per_class/a"] == 0.5
    assert {"report.html", "results/test.json", "model/model.pt"} <= data["files"]
