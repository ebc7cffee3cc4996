"""``log_results()`` after the run, into a run folder deleted since: the folder is created
again with what the run knows, as for a folder deleted while training (the epoch rows of
metrics.csv / metrics.jsonl, run.json, hyperparams.json and environment.json as last
written), so the report and ``list_runs`` still show the run's epochs beside the results."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from tracking_helpers import csv_epoch_values, make_trainer, report_epochs, tiny_data

from scramjet.tracking import Experiment, list_runs

EPOCHS = 3
NAMES = ("train_loss_epoch", "eval_loss_epoch")


def _files(run: Path) -> dict[str, Any]:
    return {n: json.loads((run / n).read_text()) for n in ("hyperparams.json", "environment.json")}


def test_results_after_the_folder_was_removed_bring_back_the_epochs(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path, save_script=False, hyperparams={"width": 16})
    trainer = make_trainer([exp])
    trainer.train(
        tiny_data(), num_epochs=EPOCHS, per_device_batch_size=32, eval_dataset=tiny_data(32, 1)
    )
    run, history = exp.run_dir, trainer.run_history
    before = _files(run)
    ended = json.loads((run / "run.json").read_text())
    shutil.rmtree(run)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exp.log_results("test", {"accuracy": 0.5})
    (message,) = [str(w.message) for w in caught if "was removed" in str(w.message)]
    assert "hyperparams.json" in message and "metrics.jsonl" in message, message
    assert f"{EPOCHS} epoch row(s)" in message, message

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    epoch_rows = [r for r in rows if r["scope"] == "epoch"]
    assert [r["epoch"] for r in epoch_rows] == list(range(1, EPOCHS + 1))
    for name in NAMES:
        values = history.get_metric_values(name)
        assert len(values) == EPOCHS
        assert [r["metrics"][name] for r in epoch_rows] == values
        assert csv_epoch_values(run, name) == dict(enumerate(values, 1))
    assert _files(run) == before
    assert json.loads((run / "results" / "test.json").read_text()) == {"accuracy": 0.5}

    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["started"] == ended["started"] and info["finished"] == ended["finished"]
    assert "folder_recreated" in info
    assert report_epochs(run) == list(range(1, EPOCHS + 1))
    (listed,) = list_runs(tmp_path)
    assert listed["status"] == "finished" and listed["epochs"] == EPOCHS
    assert listed["metrics"]["test/accuracy"] == 0.5
    for name in NAMES:
        assert listed["metrics"][name] == history.get_metric_values(name)[-1]
    assert listed["hyperparams"] == {"width": 16}
