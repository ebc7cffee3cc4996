"""Hyperparameters given as float32/float16 tensors or NumPy scalars read as written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment, list_runs


def test_single_precision_hyperparams_keep_the_decimal_the_user_wrote(tmp_path: Path) -> None:
    """``np.float32(0.1)`` was recorded as 0.10000000149011612 (the float32 value printed
    in double precision), in hyperparams.json, ``scramjet runs`` and the loggers; beside a
    run given ``0.1`` it showed as a difference the user never made."""
    given = {
        "lr": np.float32(0.1),
        "wd": torch.tensor(1e-4),
        "betas": torch.tensor([0.9, 0.999]),
        "scale": np.float16(0.3),
        "momentum": torch.tensor(0.95, dtype=torch.bfloat16),
        "grid": np.linspace(0.1, 0.5, 5, dtype=np.float32),
    }
    root = tmp_path / "runs"
    for lr in (given, {**given, "lr": 0.1}):
        exp = Experiment("p", "f32", root=root, hyperparams=lr, save_script=False)
        make_trainer([exp]).train(tiny_data(16), 1, per_device_batch_size=16)
    saved = json.loads((exp.run_dir / "hyperparams.json").read_text())["hyperparams"]
    assert saved["wd"] == 1e-4 and saved["betas"] == [0.9, 0.999]
    assert saved["scale"] == 0.3 and saved["momentum"] == 0.95
    assert saved["grid"] == [0.1, 0.2, 0.3, 0.4, 0.5]
    # each value still reads back as the same number in its own precision
    assert np.float32(saved["wd"]) == given["wd"].numpy()
    assert torch.tensor(saved["momentum"], dtype=torch.bfloat16) == given["momentum"]
    first, second = list_runs(root)
    assert first["hyperparams"] == second["hyperparams"]
    assert first["hyperparams"]["lr"] == 0.1
    listing = subprocess.run(
        [sys.executable, "-m", "scramjet", "runs", str(root), "--params", "lr,wd"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "0.10000000149" not in listing and "0.0001" in listing, listing


def test_double_precision_values_are_kept_exactly(tmp_path: Path) -> None:
    given = {"a": np.float64(0.1) + np.float64(0.2), "b": torch.tensor(1 / 3, dtype=torch.float64)}
    exp = Experiment("p", "f64", root=tmp_path / "runs", hyperparams=given, save_script=False)
    assert exp.hyperparams == {"a": 0.1 + 0.2, "b": 1 / 3}
