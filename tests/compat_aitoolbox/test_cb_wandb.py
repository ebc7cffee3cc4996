"""AIToolbox's WandBTracking on a real TrainLoop, W&B offline, read back from the run's files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from aitb_helpers import MyNeuralModel, loaders
from torch import nn
from wandb_records import read_finished_wandb_run

from scramjet.compat.aitoolbox.torchtrain.callbacks.wandb import AlertConfig, WandBTracking
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop


def _fit(callback: WandBTracking, epochs: int = 2) -> TrainLoop:
    torch.manual_seed(0)
    model = MyNeuralModel()
    train, val, test = loaders()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loop = TrainLoop(model, train, val, test, opt, nn.CrossEntropyLoss())
    loop.fit(num_epochs=epochs, callbacks=[callback])
    return loop


def test_history_config_run_name_and_alerts_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    callback = WandBTracking(
        metric_names=["loss", "val_loss"],
        hyperparams={"lr": 0.1, "batch_size": 16},
        tags=["smoke"],
        alerts=[AlertConfig("val_loss", 0.0, "minimize"), AlertConfig("loss", -1.0)],
        is_project=False,
        log_dir=str(tmp_path),
        project_name="aitb-proj",
        experiment_name="exp-1",
        mode="offline",
    )
    loop = _fit(callback)
    data = read_finished_wandb_run(tmp_path)
    assert data["runs"] and data["runs"][0][1:] == ("aitb-proj", "exp-1")
    assert data["config"]["lr"] == 0.1 and data["config"]["batch_size"] == 16
    assert data["exits"] == [0]
    rows = data["history"]
    assert [r["epoch"] for r in rows] == [0, 1]
    assert [r["loss"] for r in rows] == pytest.approx(loop.train_history["loss"])
    assert [r["val_loss"] for r in rows] == pytest.approx(loop.train_history["val_loss"])
    assert all("accumulated_loss" not in r for r in rows)  # not in metric_names
    # steps are the loop's iteration count at each epoch end (6 batches per epoch)
    assert [r["_step"] for r in rows] == [5, 11]
    # val_loss > 0 always crosses a 'minimize' bound of 0; loss never falls below -1
    assert [(n, e) for n, e, _ in callback.sent_alerts] == [("val_loss", 0), ("val_loss", 1)]


def test_batch_log_frequency_logs_at_iterations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    callback = WandBTracking(
        batch_log_frequency=4, is_project=False, log_dir=str(tmp_path), mode="offline"
    )
    _fit(callback, epochs=2)
    data = read_finished_wandb_run(tmp_path)
    steps = sorted({r["_step"] for r in data["history"]})
    # epoch ends at 5 and 11; every 4th iteration after the first epoch has history values
    assert steps == [5, 8, 11]


@pytest.mark.parametrize(
    ("alerts", "error"),
    [
        ("val_loss", TypeError),
        ([AlertConfig("val_loss", 1.0), {"val_loss": 1.0}], TypeError),
        ([AlertConfig("val_loss", 1.0, objective="lowest")], ValueError),
    ],
)
def test_bad_alerts_say_what_was_received(alerts: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"received|objective 'lowest'"):
        WandBTracking(alerts=alerts)  # type: ignore[arg-type]
