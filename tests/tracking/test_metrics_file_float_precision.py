"""``metrics.csv`` and ``metrics.jsonl`` write each step value with the precision it has:
a float32 value as its shortest float32 decimal, a float64 one with every digit."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks.base import TrainerCallback
from scramjet.tracking import Experiment

DOUBLE = 0.30000001192092896  # a float64 that is not 0.3


class _LogsValues(TrainerCallback):
    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("f32", torch.tensor(0.3))
        trainer.log("f16", torch.tensor(0.1, dtype=torch.float16))
        trainer.log("f64", torch.tensor(DOUBLE, dtype=torch.float64))
        trainer.log("third", torch.tensor(1 / 3, dtype=torch.float64))


def test_step_values_are_written_in_their_own_precision(tmp_path: Path) -> None:
    exp = Experiment("p", "prec", root=tmp_path, checkpoint=None, save_script=False)
    exp.log_every_n_steps = 1
    make_trainer([_LogsValues(), exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    text = (exp.run_dir / "metrics.csv").read_text()
    with open(exp.run_dir / "metrics.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["scope"] == "step"]
    values: dict[str, set[str]] = {}
    for row in rows:
        values.setdefault(row["name"], set()).add(row["value"])
    assert values["f32"] == {"0.3"}, text
    assert values["f16"] == {"0.1"}, text
    assert values["f64"] == {repr(DOUBLE)} and values["third"] == {repr(1 / 3)}, text
    assert "0.30000001192092896" not in {v for v in values["f32"]}
    assert np.float32(float(next(iter(values["f32"])))) == np.float32(0.3)
    # the training loss is a float32 tensor: written as its shortest float32 decimal
    for row in rows:
        if row["name"] == "train_loss":
            assert row["value"] == repr(float(str(np.float32(row["value"])))), row
    jsonl = [json.loads(line) for line in (exp.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r["metrics"] for r in jsonl if r["scope"] == "step"]
    assert all(m["f32"] == 0.3 and m["f64"] == DOUBLE and m["third"] == 1 / 3 for m in steps)


def test_a_step_mean_of_float32_values_is_written_in_float32(tmp_path: Path) -> None:
    """With gradient accumulation a step's row holds the mean of its micro-batch losses:
    the mean of float32 values is a float32 value too, written as its shortest decimal."""
    exp = Experiment("p", "accum", root=tmp_path, checkpoint=None, save_script=False)
    exp.log_every_n_steps = 1
    trainer = make_trainer([exp])
    trainer.train(tiny_data(64), 1, per_device_batch_size=8, gradient_accumulation_steps=4)
    with open(exp.run_dir / "metrics.csv", newline="") as fh:
        losses = [r["value"] for r in csv.DictReader(fh) if r["name"] == "train_loss"]
    assert len(losses) == 2
    for text in losses:
        assert text == repr(float(str(np.float32(text)))), losses


class _LogsNumPy(TrainerCallback):
    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("np32", np.float32(0.3))
        trainer.log("array32", np.array([0.7], dtype=np.float32))
        trainer.log("np64", np.float64(DOUBLE))


def test_numpy_single_precision_values_keep_their_decimal(tmp_path: Path) -> None:
    exp = Experiment("p", "numpy", root=tmp_path, checkpoint=None, save_script=False)
    exp.log_every_n_steps = 1
    make_trainer([_LogsNumPy(), exp]).train(tiny_data(16), 1, per_device_batch_size=16)
    with open(exp.run_dir / "metrics.csv", newline="") as fh:
        values = {r["name"]: r["value"] for r in csv.DictReader(fh)}
    assert values["np32"] == "0.3" and values["array32"] == "0.7", values
    assert values["np64"] == repr(DOUBLE), values


class _LogsAfterEvaluation(TrainerCallback):
    def on_evaluation_run_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("val_acc", torch.tensor(0.3))
        trainer.log("val_np", np.float32(0.7))


def test_epoch_values_logged_outside_the_batches_keep_their_decimal(tmp_path: Path) -> None:
    exp = Experiment("p", "epoch", root=tmp_path, checkpoint=None, save_script=False)
    trainer = make_trainer([_LogsAfterEvaluation(), exp])
    trainer.train(tiny_data(16), 1, eval_dataset=tiny_data(8), per_device_batch_size=8)
    with open(exp.run_dir / "metrics.csv", newline="") as fh:
        values = {r["name"]: r["value"] for r in csv.DictReader(fh) if r["scope"] == "epoch"}
    assert values["val_acc"] == "0.3" and values["val_np"] == "0.7", values
    assert np.float32(trainer.run_history.get_latest_metric("val_acc")) == np.float32(0.3)
