"""A checkpoint written by pytorch-accelerated itself: resume_from says how to load it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from scramjet.checkpoint import CorruptCheckpointError
from scramjet.compat.pytorch_accelerated import Trainer


def test_resume_from_a_peer_file_points_to_load_checkpoint(tmp_path: Path) -> None:
    old = nn.Linear(3, 1)
    path = tmp_path / "best_model.pt"
    # the layout pytorch-accelerated's save_checkpoint writes: state dicts only
    torch.save(
        {
            "model_state_dict": old.state_dict(),
            "optimizer_state_dict": torch.optim.SGD(old.parameters(), lr=0.1).state_dict(),
        },
        path,
    )
    model = nn.Linear(3, 1)
    trainer = Trainer(
        model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks=()
    )
    data = TensorDataset(torch.randn(8, 3), torch.randn(8, 1))
    with pytest.raises(CorruptCheckpointError, match=r"model_state_dict.*trainer\.load_checkpoint"):
        trainer.train(data, num_epochs=1, per_device_batch_size=4, resume_from=str(path))
    trainer.load_checkpoint(str(path))  # what the message advises works
    assert torch.equal(model.weight, old.weight)
