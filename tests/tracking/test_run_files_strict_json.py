"""Every JSON file of a run is strict JSON (no ``NaN``/``Infinity`` tokens, which ``jq``
and JavaScript's ``JSON.parse`` reject): a non-finite number is written as the string
``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, and scramjet's own readers give the float back."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks.base import TrainerCallback
from scramjet.tracking import Experiment, list_runs
from scramjet.tracking.cli_runs import hyperparams, metric_summary
from scramjet.tracking.loggers.csv import read_metrics


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


class _LogsNaN(TrainerCallback):
    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("grad_norm", torch.tensor(float("nan")))


def test_every_json_file_of_a_run_is_strict(tmp_path: Path) -> None:
    given = {"clip": float("inf"), "floor": -math.inf, "dropout": math.nan, "lr": 0.1}
    exp = Experiment("p", "strict", root=tmp_path, hyperparams=given, checkpoint=None)
    exp.log_every_n_steps = 1
    make_trainer([_LogsNaN(), exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    results = {"loss": math.nan, "ppl": math.inf, "low": -math.inf, "acc": 0.5}
    exp.log_results("test", results, predictions=torch.tensor([0.5, float("nan")]))
    files = [*sorted(exp.run_dir.rglob("*.json")), exp.run_dir / "metrics.jsonl"]
    assert exp.run_dir / "results" / "test.json" in files
    for path in files:
        for line in path.read_text().splitlines() if path.suffix == ".jsonl" else [None]:
            _strict(line if line is not None else path.read_text())
    saved = _strict((exp.run_dir / "results" / "test.json").read_text())
    assert saved == {"loss": "NaN", "ppl": "Infinity", "low": "-Infinity", "acc": 0.5}
    # our readers give the numbers back
    params = hyperparams(exp.run_dir)
    assert params["clip"] == math.inf and params["floor"] == -math.inf
    assert math.isnan(params["dropout"]) and params["lr"] == 0.1
    assert all(
        math.isnan(r["metrics"]["grad_norm"])
        for r in read_metrics(exp.run_dir)
        if "grad_norm" in r["metrics"]
    )
    assert math.isnan(metric_summary(exp.run_dir)[1]["grad_norm"])
    (run,) = list_runs(tmp_path)
    assert run["hyperparams"]["clip"] == math.inf
    assert math.isnan(run["metrics"]["test/loss"]) and run["metrics"]["test/ppl"] == math.inf
