"""A ``trainer.evaluate()`` outside ``train()`` (after training, or of a loaded checkpoint
with no training at all) is recorded by the Experiment as ``results/evaluate.json``, kept
apart from the training epochs' evaluation, and reaches the loggers as ``evaluate/<metric>``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.tracking.tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment, list_runs


def _tensorboard_tags(run_dir: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folders = {p.parent for p in run_dir.rglob("events.out.tfevents.*")}
    tags: dict[str, list[float]] = {}
    for folder in folders:
        acc = EventAccumulator(str(folder))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            tags.setdefault(tag, []).extend(e.value for e in acc.Scalars(tag))
    return tags


def test_an_evaluation_after_training_is_recorded_apart(tmp_path: Path) -> None:
    exp = Experiment("proj", "ev", root=tmp_path, checkpoint=None, loggers=("csv", "tensorboard"))
    trainer = make_trainer([exp])
    trainer.train(tiny_data(32), 1, eval_dataset=tiny_data(16, seed=1), per_device_batch_size=8)
    trainer.evaluate(tiny_data(24, seed=2), per_device_batch_size=8)
    standalone = trainer.run_history.get_metric_values("eval_loss_epoch")[-1]
    saved = json.loads((exp.run_dir / "results" / "evaluate.json").read_text())
    assert saved["eval_loss_epoch"] == standalone
    tags = _tensorboard_tags(exp.run_dir)
    assert abs(tags["evaluate/eval_loss_epoch"][-1] - standalone) < 1e-5, tags.keys()
    epoch_rows = [
        line for line in (exp.run_dir / "metrics.csv").read_text().splitlines() if "eval" in line
    ]
    assert len(epoch_rows) == 1, epoch_rows  # the training epoch's evaluation only
    assert json.loads((exp.run_dir / "run.json").read_text())["status"] == "finished"


def test_an_evaluation_without_training_makes_a_finished_run(tmp_path: Path) -> None:
    exp = Experiment("proj", "ckpt-eval", root=tmp_path, checkpoint=None)
    trainer = make_trainer([exp])
    trainer.evaluate(tiny_data(24, seed=2), per_device_batch_size=8)
    trainer.evaluate(tiny_data(16, seed=3), per_device_batch_size=8)
    losses = trainer.run_history.get_metric_values("eval_loss_epoch")
    results = exp.run_dir / "results"
    assert json.loads((results / "evaluate.json").read_text())["eval_loss_epoch"] == losses[0]
    assert json.loads((results / "evaluate_2.json").read_text())["eval_loss_epoch"] == losses[1]
    assert json.loads((exp.run_dir / "run.json").read_text())["status"] == "finished"
    (run,) = list_runs(tmp_path)
    assert run["status"] == "finished"
    listing = subprocess.run(
        [
            sys.executable,
            "-m",
            "scramjet",
            "runs",
            str(tmp_path),
            "--metrics",
            "evaluate/eval_loss_epoch",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert f"{losses[0]:.4f}"[:5] in listing, listing
