"""Continuing a run: a preset ``epoch`` and ``ModelLoadContinueTraining`` from a checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch import nn
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox import (
    ClassificationResultPackage,
    ModelCheckpoint,
    TrainLoopCheckpointEndSave,
)
from scramjet.compat.aitoolbox.experiment.local_load.local_model_load import (
    PyTorchLocalModelLoader,
)
from scramjet.compat.aitoolbox.torchtrain.callbacks.abstract import AbstractCallback
from scramjet.compat.aitoolbox.torchtrain.callbacks.model_load import ModelLoadContinueTraining
from scramjet.compat.aitoolbox.torchtrain.schedulers.warmup import LinearWithWarmupScheduler
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop

BATCHES = 5  # per epoch: 40 samples, batch size 8


class Epochs(AbstractCallback):
    """Records the loop's epoch at each epoch start."""

    def __init__(self) -> None:
        super().__init__("epochs")
        self.seen: list[int] = []

    def on_epoch_begin(self) -> None:
        self.seen.append(self.train_loop_obj.epoch)


def _parts(seed: int = 0) -> tuple[MyNeuralModel, torch.optim.Optimizer, list[DataLoader]]:
    torch.manual_seed(seed)
    model = MyNeuralModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    data = [
        DataLoader(dataset(40, 0), batch_size=8),
        DataLoader(dataset(16, 1), batch_size=8),
        DataLoader(dataset(16, 2), batch_size=8),
    ]
    return model, optimizer, data


def _scheduler(**kwargs: int) -> LinearWithWarmupScheduler:
    return LinearWithWarmupScheduler(
        num_warmup_steps=2, num_training_steps=4 * BATCHES + 1, **kwargs
    )


def test_a_preset_epoch_trains_only_the_remaining_epochs() -> None:
    model, optimizer, (train, val, test) = _parts()
    loop = TrainLoop(model, train, val, test, optimizer, nn.CrossEntropyLoss())
    epochs = Epochs()
    loop.epoch = 3
    loop.fit(num_epochs=5, callbacks=[epochs])
    assert epochs.seen == [3, 4]
    assert len(loop.train_history["loss"]) == 2
    assert optimizer.state_dict()["state"][0]["step"] == 2 * BATCHES


def test_continuing_from_a_checkpoint_equals_the_uninterrupted_run(tmp_path: Path) -> None:
    model, optimizer, (train, val, test) = _parts()
    scheduler = _scheduler()
    full = TrainLoopCheckpointEndSave(
        model,
        train,
        val,
        test,
        optimizer,
        nn.CrossEntropyLoss(),
        project_name="proj",
        experiment_name="exp",
        local_model_result_folder_path=str(tmp_path),
        hyperparams={},
        val_result_package=ClassificationResultPackage(),
        test_result_package=ClassificationResultPackage(),
        cloud_save_mode=None,
    )
    full.fit(num_epochs=4, callbacks=[scheduler])

    model2, optimizer2, (train2, val2, test2) = _parts(seed=1)  # other initial weights
    # As in AIToolbox, the new scheduler is built at the checkpoint's step (its learning rate);
    # its remaining state (the step count) comes from the checkpoint.
    scheduler2 = _scheduler(last_epoch=2 * BATCHES - 1)
    epochs = Epochs()
    cont = TrainLoop(model2, train2, val2, test2, optimizer2, nn.CrossEntropyLoss())
    load = ModelLoadContinueTraining(
        full.experiment_timestamp,
        saved_model_dir="checkpoint_model",
        epoch_num=1,  # saved at the end of the second epoch
        project_name="proj",
        experiment_name="exp",
        local_model_result_folder_path=str(tmp_path),
        cloud_save_mode="local",
    )
    # The loader is listed before the scheduler: scheduler states are restored at train begin.
    cont.fit(num_epochs=4, callbacks=[load, scheduler2, epochs])

    assert epochs.seen == [2, 3]
    for (k, a), (k2, b) in zip(
        model.state_dict().items(), model2.state_dict().items(), strict=True
    ):
        assert k == k2 and torch.equal(a, b)
    assert scheduler2.state_dict() == scheduler.state_dict()
    assert optimizer2.state_dict()["state"][0]["step"] == optimizer.state_dict()["state"][0]["step"]


def test_continuing_an_amp_run_restores_without_error(tmp_path: Path) -> None:
    model, optimizer, (train, val, test) = _parts()
    full = TrainLoopCheckpointEndSave(
        model,
        train,
        val,
        test,
        optimizer,
        nn.CrossEntropyLoss(),
        project_name="proj",
        experiment_name="amp",
        local_model_result_folder_path=str(tmp_path),
        hyperparams={},
        val_result_package=ClassificationResultPackage(),
        test_result_package=ClassificationResultPackage(),
        cloud_save_mode=None,
        use_amp=True,
    )
    full.fit(num_epochs=1)
    model2, optimizer2, (train2, val2, test2) = _parts()
    cont = TrainLoop(model2, train2, val2, test2, optimizer2, nn.CrossEntropyLoss(), use_amp=True)
    load = ModelLoadContinueTraining(
        full.experiment_timestamp,
        saved_model_dir="model",
        project_name="proj",
        experiment_name="amp",
        local_model_result_folder_path=str(tmp_path),
    )
    cont.fit(num_epochs=2, callbacks=[load])
    assert cont.epoch == 1


def test_init_amp_loads_the_saved_scaler_state() -> None:
    saved = torch.amp.GradScaler("cpu", init_scale=512.0)
    loader = PyTorchLocalModelLoader(".")
    loader.model_representation = {"amp": saved.state_dict()}
    scaler = torch.amp.GradScaler("cpu")
    assert loader.init_amp(scaler) is scaler
    assert scaler.get_scale() == pytest.approx(512.0)
    loader.model_representation = {}
    assert loader.init_amp(scaler).get_scale() == pytest.approx(512.0)  # nothing saved


def test_a_resumed_run_keeps_the_epoch_of_its_checkpoint(tmp_path: Path) -> None:
    model, optimizer, (train, val, test) = _parts()
    loop = TrainLoop(model, train, val, test, optimizer, nn.CrossEntropyLoss())
    loop.fit(num_epochs=1, callbacks=[ModelCheckpoint("p", "r", tmp_path, {})])
    model2, optimizer2, (train2, val2, test2) = _parts()
    loop2 = TrainLoop(model2, train2, val2, test2, optimizer2, nn.CrossEntropyLoss())
    loop2.epoch = 2  # ignored: the checkpoint says where the run continues
    epochs = Epochs()
    loop2.fit(
        num_epochs=3,
        callbacks=[ModelCheckpoint("p", "r", tmp_path, {}), epochs],
        resume_from=loop.experiment.run_dir / "checkpoints",
    )
    assert epochs.seen == [1, 2]
