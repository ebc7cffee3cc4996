"""``TrainLoopCheckpoint(rm_subopt_local_models=...)``: only the best checkpoints stay."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch import nn
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoopCheckpoint


def _fit(
    tmp_path: Path, metric: bool | str, val: bool = True
) -> tuple[TrainLoopCheckpoint, list[int]]:
    torch.manual_seed(0)
    model = MyNeuralModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=4.0)  # large: the best are not the last
    loop = TrainLoopCheckpoint(
        model,
        DataLoader(dataset(40, 0), batch_size=8),
        DataLoader(dataset(16, 1), batch_size=8) if val else None,
        None,
        optimizer,
        nn.CrossEntropyLoss(),
        project_name="proj",
        experiment_name="exp",
        local_model_result_folder_path=str(tmp_path),
        hyperparams={},
        cloud_save_mode=None,
        rm_subopt_local_models=metric,
        num_best_checkpoints_kept=2,
    )
    loop.fit(num_epochs=5)
    files = sorted(tmp_path.glob("proj/exp_*/checkpoint_model/*.pth"))
    return loop, sorted(int(re.search(r"_E(\d+)\.pth$", f.name)[1]) for f in files)  # type: ignore[index]


@pytest.mark.parametrize(("metric", "name"), [(True, "loss"), ("val_loss", "val_loss")])
def test_only_the_best_checkpoints_by_the_metric_stay(tmp_path, metric, name):
    loop, kept = _fit(tmp_path, metric)
    values = loop.train_history[name]
    assert len(values) == 5
    best = sorted(range(5), key=lambda e: values[e])[:2]
    assert kept == sorted(best) and kept != [3, 4], (values, kept)  # not just the newest


def test_a_metric_the_history_lacks_is_named_with_what_it_has(tmp_path):
    with pytest.raises(Exception, match=r"ranks checkpoints by 'val_loss', which the training "
                       r"history has not recorded \(it has: \[.*'loss'.*\]\)"):  # fmt: skip
        _fit(tmp_path, "val_loss", val=False)
