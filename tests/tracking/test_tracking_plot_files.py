"""Plot files of a run: one per metric, whatever the metric names look like."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment, build_plots
from scramjet.tracking.loggers.csv import metric_series, read_metrics


class _LogEpoch(TrainerCallback):
    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        for name, value in self.values.items():
            trainer.log(name, value * trainer.run_history.current_epoch)


def _train(tmp_path: Path, values: dict[str, float]) -> Experiment:
    exp = Experiment("plots", "names", root=tmp_path / "runs", save_script=False)
    make_trainer([exp, _LogEpoch(values)]).train(
        tiny_data(48), num_epochs=2, eval_dataset=tiny_data(16, 1), per_device_batch_size=16
    )
    return exp


def _report_images(run: Path) -> dict[str, str]:
    page = (run / "report.html").read_text(encoding="utf-8")
    found = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,([^"]+)"', page)
    return {alt: hashlib.sha256(base64.b64decode(data)).hexdigest() for alt, data in found}


def test_metrics_whose_file_names_collide_keep_their_own_plots(tmp_path: Path) -> None:
    """``val/acc`` and ``val_acc`` both made ``plots/val_acc.png`` (the report showed the
    second plot twice), and a metric named ``loss`` replaced the train/eval loss plot."""
    exp = _train(tmp_path, {"val/acc": 0.1, "val_acc": 0.9, "loss": 5.0})
    plots = build_plots(exp.run_dir)
    names = set(metric_series(read_metrics(exp.run_dir), "epoch"))
    assert {"val/acc", "val_acc", "loss", "train_loss_epoch"} <= names
    files = list(plots.values())
    assert len(set(files)) == len(files), plots
    assert len(list((exp.run_dir / "plots").glob("*.png"))) == len(files)
    images = _report_images(exp.run_dir)
    assert len(images) == len(plots) and len(set(images.values())) == len(images), images
    assert "val/acc" in images and "val_acc" in images and "loss" in images


def test_a_long_metric_name_does_not_fail_the_finished_run(tmp_path: Path) -> None:
    """A metric name past the file-name limit (255 bytes) failed train() at its end with
    ``OSError: File name too long`` and left no report."""
    long_name = "accuracy_of_" + "very_" * 60 + "long_name"
    wide_name = "précision_élevée_" * 12  # 204 characters, 240 bytes in UTF-8
    exp = _train(tmp_path, {long_name: 0.5, wide_name: 0.25})
    info = json.loads((exp.run_dir / "run.json").read_text(encoding="utf-8"))
    assert info["status"] == "finished", info.get("error")
    images = _report_images(exp.run_dir)
    assert long_name in images and wide_name in images
    assert all(len(p.name.encode()) < 200 for p in (exp.run_dir / "plots").iterdir())
