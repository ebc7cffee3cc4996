"""TensorBoard and W&B (offline) files deleted while training runs (the whole run folder by
a cleanup, or the logger's own files): each logger goes on in new files, with one warning,
and every value logged after the removal is there, read back with TensorBoard's
EventAccumulator and from W&B's own ``.wandb`` files. Before, both loggers wrote on into
the removed files without a word, and lost everything from the removal on."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from tracking_helpers import make_trainer, tiny_data
from wandb_records import read_finished_wandb_run

from scramjet import TrainerCallback
from scramjet.tracking import Experiment

STEPS_PER_EPOCH = 3  # tiny_data(): 96 samples, batches of 32


@pytest.fixture(autouse=True)
def _wandb_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")


class Remove(TrainerCallback):
    """As the given epoch starts, with the rows of the earlier epochs written: deletes
    what ``targets(run folder)`` names."""

    def __init__(self, exp: Experiment, epoch: int, targets: Any) -> None:
        self.exp, self.epoch, self.targets = exp, epoch, targets
        self.removed: list[Path] = []

    def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.run_history.current_epoch != self.epoch:
            return
        assert self.exp._writer is not None and self.exp._manager is not None
        self.exp._writer.flush()
        self.exp._manager.wait()
        for path in self.targets(self.exp.run_dir):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            self.removed.append(path)
        assert self.removed


def _train(exp: Experiment, remover: Remove, epochs: int) -> tuple[Any, list[str]]:
    trainer = make_trainer([exp, remover])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(
            tiny_data(), num_epochs=epochs, per_device_batch_size=32, eval_dataset=tiny_data(32, 1)
        )
    return trainer, [str(w.message) for w in caught]


def _tensorboard(run: Path) -> Any:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run))
    acc.Reload()
    return acc


def _wandb_steps(run: Path, name: str) -> dict[int, float]:
    data = read_finished_wandb_run(run)
    return {r["_step"]: r[name] for r in data["history"] if name in r}


def test_both_loggers_go_on_after_the_run_folder_is_removed(tmp_path: Path) -> None:
    exp = Experiment(
        "p",
        "e",
        root=tmp_path,
        hyperparams={"width": 16},
        save_script=False,
        log_every_n_steps=1,
        loggers=("csv", "tensorboard", "wandb"),
    )
    remover = Remove(exp, 3, lambda run: [run])
    trainer, messages = _train(exp, remover, epochs=4)
    run = exp.run_dir
    assert len(messages) == 1, messages
    assert "was removed while training" in messages[0]
    assert "TensorBoard: its event file" in messages[0] and "W&B: its offline" in messages[0]

    later = list(range(2 * STEPS_PER_EPOCH + 1, 4 * STEPS_PER_EPOCH + 1))  # steps 7..12
    csv_loss = {
        json.loads(line)["step"]: json.loads(line)["metrics"]["train_loss"]
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["scope"] == "step"
    }
    assert sorted(csv_loss) == later

    acc = _tensorboard(run)
    assert {e.step: e.value for e in acc.Scalars("train_loss")} == pytest.approx(csv_loss)
    assert [(e.step, e.value) for e in acc.Scalars("epoch")] == [(9, 3.0), (12, 4.0)]
    evals = trainer.run_history.get_metric_values("eval_loss_epoch")[2:]
    assert [e.value for e in acc.Scalars("eval_loss_epoch")] == pytest.approx(evals)
    hparams = acc.PluginTagToContent("hparams")
    assert {"_hparams_/session_start_info", "_hparams_/session_end_info"} <= set(hparams)

    data = read_finished_wandb_run(run)
    assert _wandb_steps(run, "train_loss") == pytest.approx(csv_loss)
    assert data["config"]["width"] == 16 and data["config"]["optimizer.lr"] == 0.2
    assert data["exits"] == [0]
    run_id = json.loads((run / "run.json").read_text())["wandb_run_id"]  # written back
    assert {r[0] for r in data["runs"]} == {run_id}


def _logger_files(run: Path) -> list[Path]:
    return [run / "wandb", *run.glob("events.out.tfevents.*")]


def test_logger_files_removed_alone_are_started_again(tmp_path: Path) -> None:
    exp = Experiment(
        "p",
        "e",
        root=tmp_path,
        save_script=False,
        log_every_n_steps=1,
        loggers=("csv", "tensorboard", "wandb"),
    )
    remover = Remove(exp, 2, _logger_files)
    _, messages = _train(exp, remover, epochs=3)
    assert len(remover.removed) == 2  # wandb/ and the one event file
    assert len(messages) == 1, messages
    assert "files of the run's loggers" in messages[0], messages
    assert "TensorBoard" in messages[0] and "W&B" in messages[0]

    later = list(range(STEPS_PER_EPOCH + 1, 3 * STEPS_PER_EPOCH + 1))  # steps 4..9
    acc = _tensorboard(exp.run_dir)
    assert [e.step for e in acc.Scalars("train_loss")] == later
    assert [e.step for e in acc.Scalars("epoch")] == [6, 9]
    assert sorted(_wandb_steps(exp.run_dir, "train_loss")) == later
    steps = {
        json.loads(line)["step"]
        for line in (exp.run_dir / "metrics.jsonl").read_text().splitlines()
    }
    assert steps == set(range(1, 3 * STEPS_PER_EPOCH + 1))  # the run folder kept every row
