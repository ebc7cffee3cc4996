"""Two tracked loops of a sweep created in the same second keep separate experiment folders."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from aitb_helpers import MyNeuralModel, loaders
from torch import nn

from scramjet.checkpoint import read_checkpoint
from scramjet.compat.aitoolbox import ClassificationResultPackage, TrainLoopCheckpointEndSave


def _loop(lr: float, root: Path) -> TrainLoopCheckpointEndSave:
    torch.manual_seed(0)
    model = MyNeuralModel()
    train, val, test = loaders()
    return TrainLoopCheckpointEndSave(
        model, train, val, test, torch.optim.SGD(model.parameters(), lr=lr),
        nn.CrossEntropyLoss(), "proj", "sweep", str(root), {"lr": lr},
        val_result_package=ClassificationResultPackage(),
        test_result_package=ClassificationResultPackage(), cloud_save_mode=None,
    )  # fmt: skip


def test_loops_of_the_same_second_do_not_overwrite_each_other(tmp_path: Path) -> None:
    loops = [_loop(lr, tmp_path) for lr in (0.1, 0.001)]
    loops[1].experiment_timestamp = loops[0].experiment_timestamp  # created in the same second
    loops[0].fit(num_epochs=1)
    with pytest.warns(UserWarning, match="already exists"):
        loops[1].fit(num_epochs=1)
    loops[1].fit(num_epochs=1)  # a later fit of the same loop keeps its folder

    stamps = [loop.experiment_timestamp for loop in loops]
    assert stamps[0] != stamps[1]
    for loop, stamp in zip(loops, stamps, strict=True):
        folder = tmp_path / "proj" / f"sweep_{stamp}"
        lr = loop.hyperparams["lr"]
        assert f"lr:\t{lr}" in (folder / "hyperparams_list.txt").read_text()
        saved = read_checkpoint(folder / "model" / f"model_sweep_{stamp}.pth")
        assert saved["hyperparams"]["lr"] == lr
        for name, tensor in loop.model.state_dict().items():
            assert torch.equal(saved["model_state_dict"][name], tensor)
        with open(folder / "results" / f"results_hyperParams_hist_sweep_{stamp}.p", "rb") as f:
            assert pickle.load(f)["hyperparameters"]["lr"] == lr
    assert len(list((tmp_path / "proj").iterdir())) == 2
