"""MLflow, read back with MlflowClient: one ./mlruns store for every run (compared in one
experiment), runs named after their folders, meaningful params only, source tags,
metrics at the CSV's steps and times, artifacts, status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from logger_runs import csv_series, tracked_run


def _launching_script_in_a_git_repository(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A committed train.py, made the launching script (``__main__.__file__``) of the runs
    whatever runs the tests (pytest's own ``__main__``, or a worker without a file)."""
    folder.mkdir()
    script = folder / "train.py"
    script.write_text("print('training')\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for cmd in (["init", "-q"], ["add", "train.py"], ["commit", "-q", "-m", "first"]):
        subprocess.run([*git, *cmd], cwd=folder, check=True, capture_output=True)
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(script), raising=False)
    return script


def test_mlflow_runs_share_one_store_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    script = _launching_script_in_a_git_repository(tmp_path / "project", monkeypatch)
    first = tracked_run(tmp_path / "runs", ("mlflow",), "a")
    second = tracked_run(tmp_path / "runs", ("mlflow",), "b")
    store = tmp_path / "mlruns"
    assert store.is_dir() and not (first.run_dir / "mlruns").exists()
    client = MlflowClient(tracking_uri=store.as_uri())
    experiment = client.get_experiment_by_name("proj")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in runs) == sorted(
        [first.run_dir.name, second.run_dir.name]
    ), "both runs in one experiment, named after their folders"

    run_id = json.loads((first.run_dir / "run.json").read_text())["mlflow_run_id"]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params == {
        "lr": "0.2",
        "width": "16",
        "note": "baseline",
        "layers": "[16, 8]",
        "seed": "None",
        "optimizer": "SGD",
        "optimizer.lr": "0.2",
        "optimizer.momentum": "0",
        "optimizer.weight_decay": "0",
        "scheduler": "none",
        "batch_size": "16",
        "gradient_accumulation_steps": "1",
        "precision": run.data.params["precision"],
        "num_epochs": "2",
        "world_size": "1",
    }
    tags = run.data.tags
    assert tags["mlflow.user"] and tags["mlflow.source.name"] == str(script)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=script.parent
    ).stdout.strip()
    assert len(commit) == 40 and tags.get("mlflow.source.git.commit") == commit

    csv = csv_series(first.run_dir)
    assert set(run.data.metrics) == set(csv) | {"epoch", "test/accuracy", "test/per_class/a"}
    for name, points in csv.items():
        history = sorted(client.get_metric_history(run_id, name), key=lambda m: m.step)
        assert [m.step for m in history] == [s for s, _, _ in points], name
        assert [m.value for m in history] == pytest.approx([v for _, v, _ in points])
        assert [m.timestamp for m in history] == pytest.approx(
            [t * 1000 for *_, t in points], abs=2
        )
    epochs = client.get_metric_history(run_id, "epoch")
    assert sorted((m.step, m.value) for m in epochs) == [(6, 1.0), (12, 2.0)]
    assert run.data.metrics["test/accuracy"] == 0.75

    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"report.html", "results", "model"} <= artifacts
    assert {a.path for a in client.list_artifacts(run_id, "results")} == {"results/test.json"}
    model = {a.path for a in client.list_artifacts(run_id, "model")}
    assert "model/model.pt" in model


def test_runs_of_a_new_project_started_together_share_its_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two jobs of a sweep start at once: between this run's lookup of the project's MLflow
    experiment and its creation, the other job creates it (that interleaving, forced)."""
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    store = (tmp_path / "mlruns").as_uri()
    original = MlflowClient.create_experiment

    def other_job_first(self: MlflowClient, name: str, *args: Any, **kwargs: Any) -> str:
        monkeypatch.setattr(MlflowClient, "create_experiment", original)
        MlflowClient(tracking_uri=store).create_experiment(name)  # the other job wins
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "create_experiment", other_job_first)
    exp = tracked_run(tmp_path / "runs", ("mlflow",), "sweep")
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "finished" and "logger_errors" not in info
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("proj")
    assert experiment is not None
    run = client.get_run(info["mlflow_run_id"])
    assert run.info.experiment_id == experiment.experiment_id and run.info.status == "FINISHED"


def test_a_deleted_project_experiment_is_named_with_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    from scramjet.tracking.loggers.mlflow import MLflowTracker

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    MLflowTracker(tmp_path / "a", "proj").close()
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    experiment_id = client.get_experiment_by_name("proj").experiment_id  # type: ignore[union-attr]
    client.delete_experiment(experiment_id)  # as the MLflow UI's delete does
    with pytest.raises(ValueError, match=r"'proj'.*was deleted") as raised:
        MLflowTracker(tmp_path / "b", "proj")
    assert f"mlflow experiments restore --experiment-id {experiment_id}" in str(raised.value)
    client.restore_experiment(experiment_id)
    assert MLflowTracker(tmp_path / "c", "proj").run_id
