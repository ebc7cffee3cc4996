"""A run folder deleted while training runs (a cleanup script, a user): the Experiment
recreates it with one warning and training continues to a finished run; results logged after
the run into a removed folder are kept in it, created again."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from s3_helpers import S3Server
from tracking_helpers import make_trainer, tiny_data

from scramjet import TrainerCallback
from scramjet.tracking import Experiment, list_runs


def _remove(run: Path) -> None:
    """``rm -rf run``, retried: the background threads may write into it meanwhile."""
    for _ in range(100):
        shutil.rmtree(run, ignore_errors=True)
        if not run.exists():
            return
    raise AssertionError(f"could not remove {run}")


class RemoveRunFolder(TrainerCallback):
    """Deletes the Experiment's run folder as the given epoch starts."""

    def __init__(self, exp: Experiment, epoch: int) -> None:
        self.exp, self.epoch = exp, epoch

    def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.run_history.current_epoch == self.epoch:
            if self.exp._manager is not None:
                self.exp._manager.wait()
            _remove(self.exp.run_dir)


def _train(tmp_path: Path, **options: Any) -> tuple[Experiment, list[warnings.WarningMessage]]:
    exp = Experiment("p", "e", root=tmp_path / "runs", save_script=False, **options)
    trainer = make_trainer([exp, RemoveRunFolder(exp, epoch=2)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(tiny_data(), num_epochs=3, per_device_batch_size=32)
    return exp, list(caught)


def test_training_survives_its_run_folder_being_deleted(tmp_path: Path) -> None:
    exp, caught = _train(tmp_path, log_every_n_steps=1)
    run = exp.run_dir
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["last_step"] == 9
    removed = [w for w in caught if "was removed" in str(w.message)]
    assert len(removed) == 1, [str(w.message) for w in caught]
    others = [
        str(w.message) for w in caught if issubclass(w.category, RuntimeWarning | UserWarning)
    ]
    assert others == [str(removed[0].message)], others
    assert str(run) in str(removed[0].message)
    assert (run / "hyperparams.json").is_file()
    assert (run / "environment.json").is_file()
    assert sorted(p.name for p in (run / "checkpoints").glob("*.pt"))
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == 9
    assert (run / "report.html").is_file()


def test_recreated_run_folder_is_mirrored_to_storage(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    exp, caught = _train(tmp_path, storage=f"s3://{bucket}/team", sync_every_s=0)
    run = exp.run_dir
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    assert sum("was removed" in str(w.message) for w in caught) == 1
    assert exp.upload_report is not None and exp.upload_report.ok, exp.upload_report
    prefix = f"team/p/{run.name}/"
    keys = {k[len(prefix) :] for k in s3.list_keys(bucket)}
    local = {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()}
    assert local <= keys
    body = s3.client().get_object(Bucket=bucket, Key=prefix + "run.json")["Body"].read()
    assert json.loads(body)["status"] == "finished"


class RemoveAfterCheckpointQueued(TrainerCallback):
    """Deletes the run folder right after the Experiment queued epoch 1's checkpoint,
    while the background writer is still writing it."""

    def __init__(self, exp: Experiment) -> None:
        self.exp = exp

    def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == 2:
            _remove(self.exp.run_dir)


def test_a_checkpoint_in_flight_when_the_folder_is_removed(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(6, 1500), torch.nn.Linear(1500, 1500))
    model.append(torch.nn.Linear(1500, 3))
    exp = Experiment("p", "e", root=tmp_path / "runs", save_script=False, keep_last=1)
    trainer = make_trainer([exp, RemoveAfterCheckpointQueued(exp)], model=model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(tiny_data(), num_epochs=2, per_device_batch_size=48)
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "finished", info
    assert info["folder_recreated"]["step"] == 4, [str(w.message) for w in caught]
    assert sum("was removed" in str(w.message) for w in caught) == 1
    assert [p.name.split("-")[-1] for p in (exp.run_dir / "checkpoints").glob("*.pt")] == [
        "step4.pt"
    ]


class RemoveThenInterrupt(TrainerCallback):
    """Deletes the run folder, then stops the run as Ctrl-C would."""

    def __init__(self, exp: Experiment) -> None:
        self.exp = exp

    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == 4:
            _remove(self.exp.run_dir)
            raise KeyboardInterrupt


def test_an_interrupted_run_whose_folder_was_removed_records_its_end(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path / "runs", save_script=False, checkpoint=None)
    trainer = make_trainer([exp, RemoveThenInterrupt(exp)])
    with warnings.catch_warnings(record=True) as caught, pytest.raises(KeyboardInterrupt):
        warnings.simplefilter("always")
        trainer.train(tiny_data(), num_epochs=3, per_device_batch_size=32)
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "interrupted"
    assert info["last_step"] == 4
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "to record how the run ended" in messages[0], messages


def test_results_logged_after_the_folder_was_removed_are_kept(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path / "runs", save_script=False)
    make_trainer([exp]).train(tiny_data(), num_epochs=1, per_device_batch_size=32)
    _remove(exp.run_dir)
    with pytest.warns(RuntimeWarning, match=r"run folder .* was removed; it is created again"):
        path = exp.log_results("test", {"accuracy": 0.5})
    assert path is not None and json.loads(path.read_text()) == {"accuracy": 0.5}
    assert json.loads((exp.run_dir / "run.json").read_text())["status"] == "finished"
    (run,) = list_runs(tmp_path / "runs")
    # the epoch the run trained is written back with the folder (see
    # test_results_into_removed_run_folder.py), beside the result logged after
    assert run["metrics"]["test/accuracy"] == 0.5 and run["epochs"] == 1, run
