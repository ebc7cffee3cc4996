"""Values read back by ``load`` keep the layout ``torch.load`` gives them: an expanded
tensor (stride 0) stays one element in memory, and views of one tensor stay views."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager

N = 10_000_000  # 40 MB once materialised; 4 bytes as saved


@pytest.mark.parametrize("async_write", [True, False])
def test_an_expanded_tensor_is_saved_and_loaded_with_its_stride_zero_layout(
    tmp_path: Path, async_write: bool
) -> None:
    base = torch.arange(6.0)
    state = {"big": torch.full((1,), 2.5).expand(N), "pair": [base, base[2:4]]}
    manager = CheckpointManager(tmp_path / "run", async_write=async_write)
    path = manager.save(state, step=1)
    manager.wait()
    torch.save(state, tmp_path / "reference.pt")  # plain PyTorch, in the foreground
    assert os.path.getsize(path) < os.path.getsize(tmp_path / "reference.pt") + 4096

    values = manager.load().values
    reference = torch.load(tmp_path / "reference.pt", weights_only=True)
    big = values["big"]
    assert big.stride() == reference["big"].stride() == (0,)
    assert big.untyped_storage().nbytes() == 4  # not 40 MB
    assert torch.equal(big[:3], torch.full((3,), 2.5)) and big.shape == (N,)
    whole, part = values["pair"]
    assert part.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()
    whole[2] = 100.0  # still a view, as torch.load returns it
    assert part[0].item() == 100.0
    manager.close()


def test_loaded_values_do_not_share_memory_with_the_file_or_the_next_load(
    tmp_path: Path,
) -> None:
    manager = CheckpointManager(tmp_path, async_write=False)
    manager.save({"t": torch.arange(4.0).expand(3, 4)}, step=1)
    first = manager.load().values["t"]
    second = manager.load().values["t"]
    assert first.stride() == (0, 1)
    assert first.untyped_storage().data_ptr() != second.untyped_storage().data_ptr()
    assert torch.equal(second, torch.arange(4.0).expand(3, 4))
