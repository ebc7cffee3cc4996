"""The newest checkpoint is chosen by its file name; a file renamed or copied under a
newer name than its content (``cp ckpt-000001-step2.pt ckpt-000009-step90.pt``) was
loaded as the latest without a word. It still loads (its content says where training
goes on), with a warning naming both."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from torch import nn

from scramjet.checkpoint import CheckpointManager


def test_a_file_whose_name_disagrees_with_its_content_warns(tmp_path: Path) -> None:
    model = nn.Linear(2, 1)
    with CheckpointManager(tmp_path, keep_last=5, async_write=False) as manager:
        first = manager.save({"model": model}, step=2)
        manager.save({"model": model}, step=4)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # intact names: no warning
            assert manager.load({"model": model}).step == 4
            assert manager.load({"model": model}, which=first).step == 2
    shutil.copy(first, tmp_path / "ckpt-000009-step90.pt")
    manager = CheckpointManager(tmp_path)
    said = (
        r"ckpt-000009-step90.pt.*by its name \(sequence 9, step 90\) but holds sequence 1, step 2"
    )
    with pytest.warns(UserWarning, match=said + ".*move it out of"):
        result = manager.load({"model": nn.Linear(2, 1)})
    assert (result.path.name, result.step) == ("ckpt-000009-step90.pt", 2)
    # loaded by its path, it is what was asked for: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert manager.load({"model": model}, which=result.path).step == 2
