"""gpu_mode='ddp' from a plain process: the TrainLoop starts its processes through scramjet's launcher."""

from __future__ import annotations

import copy

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch import nn
from torch.utils.data import DataLoader

from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop

pytestmark = pytest.mark.distributed


def _fit(model: MyNeuralModel, batch_size: int, gpu_mode: str) -> TrainLoop:
    loop = TrainLoop(
        model,
        DataLoader(dataset(64, 0), batch_size=batch_size),
        DataLoader(dataset(20, 1), batch_size=8),
        None,
        torch.optim.SGD(model.parameters(), lr=0.2),
        nn.CrossEntropyLoss(),
        gpu_mode=gpu_mode,
    )
    assert loop.fit(num_epochs=2) is model
    return loop


@pytest.mark.slow  # AIToolbox DDP under torchrun stays in the default run (test_ddp.py)
def test_ddp_spawns_two_cpu_processes_and_matches_one_process_with_the_same_global_batch() -> None:
    torch.manual_seed(0)
    single = MyNeuralModel()
    spawned = copy.deepcopy(single)
    reference = _fit(single, batch_size=16, gpu_mode="single")
    loop = _fit(spawned, batch_size=8, gpu_mode="ddp")  # 2 processes x 8 = global batch 16
    for a, b in zip(single.parameters(), spawned.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert loop.total_iteration_idx == 7  # 4 batches per process and epoch, from -1
    assert loop.epoch == 1 and len(loop.train_history["val_loss"]) == 2
    assert loop.train_history["val_loss"] == pytest.approx(
        reference.train_history["val_loss"], rel=1e-5
    )
