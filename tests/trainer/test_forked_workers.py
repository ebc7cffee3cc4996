"""DataLoader workers forked from the training process leave its objects uncollected."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch.utils.data import Dataset


class _Finalised:
    """Part of a reference cycle; notes the pid of every process that collects it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.me = self  # a cycle: only the collector frees it
        self.tensor: Any = None

    def __del__(self) -> None:
        with self.out.open("a") as f:
            f.write(f"{os.getpid()} ")


class _Collecting(Dataset[Any]):
    """Blobs whose every read runs the collector (as allocation in a worker may)."""

    def __init__(self) -> None:
        self.data = blobs(n=32)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> Any:
        gc.collect()
        return self.data[i]


def _train_with_garbage(out: Path, tensor: Any) -> None:
    trainer = make_trainer(TinyMLP(), seed=0)
    gc.collect()
    gc.disable()  # the garbage below stays uncollected until the workers have forked
    try:
        garbage = _Finalised(out)
        garbage.tensor = tensor
        del garbage
        trainer.train(
            _Collecting(), num_epochs=1, per_device_batch_size=8,
            train_dataloader_kwargs={"num_workers": 2},
        )  # fmt: skip
    finally:
        gc.enable()
    gc.collect()


def test_workers_do_not_collect_garbage_they_inherited(tmp_path: Path) -> None:
    # Before, a worker's collector freed the training process's garbage: a CUDA tensor
    # in it aborted the worker. A finaliser shows which process collected it.
    out = tmp_path / "collected_by"
    _train_with_garbage(out, torch.ones(2))
    assert out.read_text().split() == [str(os.getpid())]


@pytest.mark.gpu
def test_cuda_garbage_in_the_training_process_does_not_abort_the_workers(tmp_path: Path) -> None:
    out = tmp_path / "collected_by"
    _train_with_garbage(out, torch.ones(2, device="cuda"))
    assert out.read_text().split() == [str(os.getpid())]
