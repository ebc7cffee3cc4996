"""Hyperparameters AIToolbox's checkpoints carried (torch.save pickled them) save and load."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from aitb_helpers import MyNeuralModel, loaders
from torch import nn

from scramjet.compat.aitoolbox import ClassificationResultPackage, TrainLoopCheckpointEndSave
from scramjet.compat.aitoolbox.experiment.local_load.local_model_load import (
    PyTorchLocalModelLoader,
)


def test_functions_and_numpy_values_in_hyperparams_do_not_stop_training(tmp_path: Path) -> None:
    torch.manual_seed(0)
    train, val, test = loaders()
    model = MyNeuralModel()
    hyperparams = {
        "lr": np.float32(0.01),
        "weights": torch.tensor([1.0, 2.0]),
        "nested": {"steps": np.arange(3), "activation": torch.relu},
        "metric": math.sqrt,
        "name": "ünï",
    }
    loop = TrainLoopCheckpointEndSave(
        model,
        train,
        val,
        test,
        torch.optim.SGD(model.parameters(), lr=0.01),
        nn.CrossEntropyLoss(),
        project_name="proj",
        experiment_name="exp",
        local_model_result_folder_path=str(tmp_path),
        hyperparams=hyperparams,
        test_result_package=ClassificationResultPackage(),
        cloud_save_mode=None,
    )
    with pytest.warns(UserWarning, match=r"hyperparams\['metric'\]"):
        loop.fit(num_epochs=1)

    loader = PyTorchLocalModelLoader(str(tmp_path))
    saved = loader.load_model("proj", "exp", loop.experiment_timestamp, epoch_num=0)
    saved_hp = saved["hyperparams"]
    assert saved_hp["lr"] == pytest.approx(0.01)
    assert torch.equal(saved_hp["weights"], torch.tensor([1.0, 2.0]))
    assert saved_hp["name"] == "ünï"
    # What cannot be stored safely is kept as its text, as hyperparams_list.txt shows it.
    assert "sqrt" in saved_hp["metric"]
    assert "relu" in saved_hp["nested"]["activation"]
    # The loop's own hyperparameters are left as the user passed them.
    assert hyperparams["metric"] is math.sqrt
    fresh = loader.init_model(MyNeuralModel())
    assert torch.equal(fresh.l1.weight, model.l1.weight)


def test_load_model_gives_numpy_hyperparams_back_as_arrays(tmp_path: Path) -> None:
    from scramjet.compat.aitoolbox.experiment.local_save.local_model_save import (
        PyTorchLocalModelSaver,
    )

    model = nn.Linear(2, 1)
    checkpoint = {
        "model_state_dict": model.state_dict(),
        "optimizer_state_dict": None,
        "epoch": 3,
        "hyperparams": {"class_weights": np.array([0.5, 2.0]), "layers": [np.arange(2)]},
    }
    PyTorchLocalModelSaver(str(tmp_path), checkpoint_model=True).save_model(
        checkpoint, "proj", "exp", "T1", epoch=3
    )
    saved = PyTorchLocalModelLoader(str(tmp_path)).load_model("proj", "exp", "T1", epoch_num=3)
    weights = saved["hyperparams"]["class_weights"]
    assert isinstance(weights, np.ndarray)
    np.testing.assert_array_equal(weights, [0.5, 2.0])
    np.testing.assert_array_equal(saved["hyperparams"]["layers"][0], [0, 1])
