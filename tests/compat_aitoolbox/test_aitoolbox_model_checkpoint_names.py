"""Where each ModelCheckpoint saves: the top-level (tracked) name and AIToolbox's module path."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from aitb_helpers import MyNeuralModel, dataset
from torch.utils.data import DataLoader

import scramjet.compat.aitoolbox as top
from scramjet.compat.aitoolbox import TrainLoop
from scramjet.compat.aitoolbox.torchtrain.callbacks import model_save


def _fit(callback: object) -> None:
    model = MyNeuralModel()
    TrainLoop(
        model,
        DataLoader(dataset(16, 0), batch_size=8),
        None,
        None,
        torch.optim.SGD(model.parameters(), lr=0.1),
        torch.nn.CrossEntropyLoss(),
    ).fit(num_epochs=1, callbacks=[callback])


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_top_level_name_is_the_tracked_callback(tmp_path: Path) -> None:
    callback = top.ModelCheckpoint("proj", "exp", tmp_path, {"lr": 0.1})
    assert callback.tracking.cloud_save_mode is None  # local unless asked
    _fit(callback)
    (run,) = (tmp_path / "proj").iterdir()
    assert re.fullmatch(r"exp_\d{8}-\d{6}_[0-9a-f]+", run.name)  # exp_<time>_<id>
    files = _files(run)
    assert any(f.startswith("checkpoints/ckpt-") for f in files)
    assert "hyperparams.json" in files and not any("checkpoint_model" in f for f in files)


def test_module_path_name_is_aitoolboxs_callback(tmp_path: Path) -> None:
    assert model_save.ModelCheckpoint("p", "e", str(tmp_path), {}).cloud_save_mode == "s3"
    _fit(model_save.ModelCheckpoint("proj", "exp", str(tmp_path), {"lr": 0.1}, None))
    (run,) = (tmp_path / "proj").iterdir()
    assert re.fullmatch(r"exp_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", run.name)  # AIToolbox's
    files = _files(run)
    assert "hyperparams_list.txt" in files
    assert [f for f in files if f.startswith("checkpoint_model/")] == [
        f"checkpoint_model/model_{run.name}_E0.pth"
    ]
    assert top.ModelCheckpoint is not model_save.ModelCheckpoint
