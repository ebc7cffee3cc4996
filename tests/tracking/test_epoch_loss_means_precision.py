"""The trainer's epoch loss means (``train_loss_epoch``, ``eval_loss_epoch``) are means of
float32 losses: ``metrics.csv`` and ``metrics.jsonl`` write them as their shortest float32
decimal, as they write the step losses, not as the float64 quotient of the float32 sums;
``trainer.run_history`` holds the same value as the files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment

LOSS_MEANS = {"train_loss_epoch", "eval_loss_epoch"}


def _shortest_float32(text: str) -> str:
    return repr(float(str(np.float32(text))))


@pytest.mark.xfail(
    strict=True,
    reason="the trainer's epoch loss mean is the float64 quotient of float32 sums "
    "(1.058996041615804 where the step losses read 1.0589961): rounding it to float32 put "
    "AIToolbox's own comparison of runs with and without accumulation past its 6 places",
)
def test_epoch_loss_means_are_written_as_float32(tmp_path: Path) -> None:
    exp = Experiment("p", "means", root=tmp_path, checkpoint=None, save_script=False)
    trainer = make_trainer([exp])
    # 96 samples in batches of 16 (6 losses): their mean is not a float32 number in float64
    trainer.train(tiny_data(96), 2, eval_dataset=tiny_data(40, seed=1), per_device_batch_size=16)
    with open(exp.run_dir / "metrics.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["name"] in LOSS_MEANS]
    assert {r["name"] for r in rows} == LOSS_MEANS and len(rows) == 4, rows
    for row in rows:
        assert row["value"] == _shortest_float32(row["value"]), rows
        assert len(row["value"]) < 14, rows  # not 1.058996041615804-long
    history = trainer.run_history
    for row in rows:  # the same value as the trainer recorded, in float32
        recorded = history.get_metric_values(row["name"])[int(row["epoch"]) - 1]
        assert float(row["value"]) == recorded, (row, recorded)
    lines = (exp.run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    epochs = [r["metrics"] for r in records if r["scope"] == "epoch"]
    written = [m[n] for m in epochs for n in LOSS_MEANS if n in m]
    assert len(written) == 4 and all(repr(v) == _shortest_float32(repr(v)) for v in written)
