"""A run made without ``train()`` (an evaluation whose results are logged, or an
Experiment used on its own) still records the hyperparameters it was given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment, list_runs


def test_an_evaluation_run_records_its_hyperparams(tmp_path: Path) -> None:
    given = {"lr": 0.1, "model": {"width": 16}}
    exp = Experiment("p", "eval", root=tmp_path, hyperparams=given, checkpoint=None)
    trainer = make_trainer([exp])
    preds = trainer.predict(tiny_data(16), per_device_batch_size=8)
    targets = tiny_data(16).tensors[1]
    exp.log_results("test", {"accuracy": (preds.argmax(1) == targets).float().mean()})
    exp.finish()
    saved = json.loads((exp.run_dir / "hyperparams.json").read_text())
    assert saved["hyperparams"] == given
    assert saved["project"] == "p" and saved["experiment"] == "eval"
    (run,) = list_runs(tmp_path)
    assert run["hyperparams"] == {"lr": 0.1, "model.width": 16}
    listing = subprocess.run(
        [sys.executable, "-m", "scramjet", "runs", str(tmp_path), "--params", "lr"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "0.1" in listing, listing


def test_training_after_start_replaces_the_record_with_the_full_one(tmp_path: Path) -> None:
    exp = Experiment("p", "both", root=tmp_path, hyperparams={"lr": 0.2}, checkpoint=None)
    exp.start()
    assert json.loads((exp.run_dir / "hyperparams.json").read_text())["hyperparams"] == {"lr": 0.2}
    make_trainer([exp]).train(tiny_data(16), 1, per_device_batch_size=16)
    saved = json.loads((exp.run_dir / "hyperparams.json").read_text())
    assert saved["hyperparams"] == {"lr": 0.2} and saved["optimizer"]["class"] == "SGD"
    assert saved["model"]["parameters"] == sum(
        p.numel() for p in make_trainer([]).model.parameters()
    )
