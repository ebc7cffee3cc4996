"""Clear errors for checkpoint paths and files that are not what they should be."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager, CorruptCheckpointError, read_checkpoint


def test_a_manager_of_a_file_says_it_needs_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "last.pt"
    path.write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match=r"needs a directory.*last\.pt' is a file"):
        CheckpointManager(path)


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", r"the file is empty \(0 bytes\)"), (b"hello", r"\(5 bytes\) is not a torch.save")],
)
def test_a_file_that_is_no_archive_is_named_as_such(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "ckpt-000001-step1.pt"
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError, match=reason) as failed:
        read_checkpoint(path)
    assert "mmap" not in str(failed.value)  # torch's message is about its own options
    manager = CheckpointManager(tmp_path)
    with pytest.raises(CorruptCheckpointError, match=reason):
        manager.load({"model": torch.nn.Linear(2, 2)})


def test_load_checkpoint_of_a_missing_path_names_the_call_it_came_from(tmp_path: Path) -> None:
    from scramjet import Trainer

    model = torch.nn.Linear(2, 2)
    trainer = Trainer(model, torch.nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(FileNotFoundError, match=r"checkpoint '.*nope\.pt' does not exist") as e:
        trainer.load_checkpoint(tmp_path / "nope.pt")
    assert "load_checkpoint()" in str(e.value)


def test_resuming_from_a_folder_without_checkpoints_says_what_to_pass(tmp_path: Path) -> None:
    # Before: "check `manager.latest_path is not None` before resuming", advice about an
    # object the Trainer's caller never holds.
    from torch import nn
    from torch.utils.data import TensorDataset

    from scramjet import Trainer

    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    model = nn.Linear(2, 1)
    trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1))
    data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    with pytest.raises(FileNotFoundError, match=r"no checkpoint in the folder .*'checkpoints'\]"):
        trainer.train(data, num_epochs=1, resume_from=tmp_path / "run")
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(FileNotFoundError, match=r"run folder's checkpoints/"):
        trainer.load_checkpoint(tmp_path / "run" / "checkpoints")
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
