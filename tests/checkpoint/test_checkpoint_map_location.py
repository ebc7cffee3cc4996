"""``load(map_location=...)`` takes what ``torch.load`` takes: a device, a string, a dict
of device names or a function, and gives back the same values bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from scramjet.checkpoint import CheckpointManager, read_checkpoint


def _relocate(storage: Any, location: str) -> Any:
    return storage


@pytest.mark.parametrize(
    "map_location",
    [{"cpu": "cpu"}, {"cuda:0": "cpu"}, _relocate, torch.device("cpu")],
    ids=["dict", "dict-cuda-to-cpu", "function", "device"],
)
def test_load_takes_every_map_location_torch_load_takes(tmp_path: Path, map_location: Any) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    with CheckpointManager(tmp_path / "ckpt") as manager:
        manager.save({"model": model, "opt": optimizer, "extra": torch.arange(6.0)}, step=3)

    restored = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    restored_opt = torch.optim.AdamW(restored.parameters(), lr=0.01)
    result = manager.load({"model": restored, "opt": restored_opt}, map_location=map_location)

    assert result.step == 3
    for name, value in model.state_dict().items():
        assert torch.equal(restored.state_dict()[name], value), name
    saved_state = optimizer.state_dict()["state"]
    for index, values in restored_opt.state_dict()["state"].items():
        for key, value in values.items():
            assert torch.equal(value, saved_state[index][key]), (index, key)
    assert torch.equal(result.values["extra"], torch.arange(6.0))
    payload = read_checkpoint(result.path, map_location=map_location)
    assert torch.equal(payload["state"]["extra"], torch.arange(6.0))
