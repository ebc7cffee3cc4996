"""A run folder deleted while training is created again holding what the run still knows:
the epoch rows of metrics.csv / metrics.jsonl (every epoch, as the trainer's history has
them), run.json, hyperparams.json and environment.json as they were, so the report and
``list_runs`` built from the folder show every epoch. Only the per-step rows written before
the removal (and the checkpoints) are lost."""

from __future__ import annotations

import csv
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from tracking_helpers import csv_epoch_values, make_trainer, report_epochs, tiny_data

from scramjet import TrainerCallback
from scramjet.tracking import Experiment, list_runs

STEPS_PER_EPOCH = 3  # tiny_data(): 96 samples, batches of 32


class RemoveRunFolder(TrainerCallback):
    """As the given epoch starts, with every row of the earlier epochs on disk: keeps the
    run's JSON files as they are, then deletes the run folder as ``rm -rf`` would."""

    def __init__(self, exp: Experiment, epoch: int) -> None:
        self.exp, self.epoch = exp, epoch
        self.before: dict[str, Any] = {}

    def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.run_history.current_epoch != self.epoch:
            return
        assert self.exp._writer is not None and self.exp._manager is not None
        self.exp._writer.flush()  # the rows of the earlier epochs are in the files now
        self.exp._manager.wait()
        run = self.exp.run_dir
        for name in ("run.json", "hyperparams.json", "environment.json"):
            self.before[name] = json.loads((run / name).read_text())
        epochs = [json.loads(line)["epoch"] for line in (run / "metrics.jsonl").open()]
        assert max(epochs) == self.epoch - 1, epochs  # on disk before the removal
        shutil.rmtree(run)


def _train(exp: Experiment, remover: RemoveRunFolder, epochs: int, **kwargs: Any) -> Any:
    trainer = make_trainer([exp, remover])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(
            tiny_data(),
            num_epochs=epochs,
            per_device_batch_size=32,
            eval_dataset=tiny_data(32, 1),
            **kwargs,
        )
    removed = [str(w.message) for w in caught if "was removed" in str(w.message)]
    assert len(removed) == 1, [str(w.message) for w in caught]
    return trainer, removed[0]


def _jsonl(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_the_recreated_folder_holds_every_epoch_and_the_run_files(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path, save_script=False, log_every_n_steps=1)
    remover = RemoveRunFolder(exp, epoch=3)
    trainer, message = _train(exp, remover, epochs=4)
    run, history = exp.run_dir, trainer.run_history

    epoch_rows = [r for r in _jsonl(run) if r["scope"] == "epoch"]
    assert [r["epoch"] for r in epoch_rows] == [1, 2, 3, 4]
    for name in ("train_loss_epoch", "eval_loss_epoch"):
        values = history.get_metric_values(name)
        assert [r["metrics"][name] for r in epoch_rows] == values
        assert csv_epoch_values(run, name) == dict(enumerate(values, 1))
    assert [r["step"] for r in epoch_rows] == [3, 6, 9, 12]
    # the per-step rows from the removal on are all kept; those before it are lost
    steps = [r["step"] for r in _jsonl(run) if r["scope"] == "step"]
    assert steps == list(range(2 * STEPS_PER_EPOCH + 1, 4 * STEPS_PER_EPOCH + 1))

    assert report_epochs(run) == [1, 2, 3, 4]
    (listed,) = list_runs(tmp_path)
    assert listed["epochs"] == 4
    assert listed["metrics"]["eval_loss_epoch"] == history.get_metric_values("eval_loss_epoch")[-1]

    for name in ("hyperparams.json", "environment.json"):
        assert json.loads((run / name).read_text()) == remover.before[name], name
    info = json.loads((run / "run.json").read_text())
    assert info["session_started"] == remover.before["run.json"]["session_started"]
    assert info["started"] == remover.before["run.json"]["started"]
    assert info["folder_recreated"]["step"] == 3 * STEPS_PER_EPOCH  # noticed as epoch 3 ends
    assert info["status"] == "finished"
    assert "2 epoch row(s) of the run so far (epochs 1-2)" in message, message


def test_a_resumed_run_writes_back_the_epochs_of_its_earlier_session(tmp_path: Path) -> None:
    """The epochs logged before a resume (another process) are known from the metric files
    read at the resume, not only those logged since."""
    first = Experiment("p", "e", root=tmp_path, save_script=False)
    make_trainer([first]).train(tiny_data(), num_epochs=2, per_device_batch_size=32)

    exp = Experiment("p", "e", root=tmp_path, save_script=False, resume=first.run_dir)
    trainer, _ = _train(exp, RemoveRunFolder(exp, epoch=4), epochs=4)
    assert exp.run_dir == first.run_dir
    epoch_rows = [r for r in _jsonl(exp.run_dir) if r["scope"] == "epoch"]
    assert [r["epoch"] for r in epoch_rows] == [1, 2, 3, 4]
    values = trainer.run_history.get_metric_values("train_loss_epoch")
    assert [r["metrics"]["train_loss_epoch"] for r in epoch_rows][-len(values) :] == values
    assert report_epochs(exp.run_dir) == [1, 2, 3, 4]


class RemoveMetricsCsv(TrainerCallback):
    """Deletes metrics.csv alone (metrics.jsonl stays) as epoch 2 starts."""

    def __init__(self, exp: Experiment) -> None:
        self.exp = exp

    def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.run_history.current_epoch == 2:
            assert self.exp._writer is not None
            self.exp._writer.flush()
            (self.exp.run_dir / "metrics.csv").unlink()


def test_metrics_csv_removed_alone_is_written_again_from_metrics_jsonl(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path, save_script=False, log_every_n_steps=1)
    trainer = make_trainer([exp, RemoveMetricsCsv(exp)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(tiny_data(), num_epochs=3, per_device_batch_size=32)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "metrics.csv was written again from metrics.jsonl" in messages[0], messages
    values = trainer.run_history.get_metric_values("train_loss_epoch")
    assert csv_epoch_values(exp.run_dir, "train_loss_epoch") == dict(enumerate(values, 1))
    with (exp.run_dir / "metrics.csv").open(newline="") as fh:
        steps = sorted({int(r["step"]) for r in csv.DictReader(fh) if r["scope"] == "step"})
    assert steps == list(range(1, 3 * STEPS_PER_EPOCH + 1))
