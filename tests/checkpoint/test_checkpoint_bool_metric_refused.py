"""A bool given as a checkpoint metric (``metrics={"loss": True}``) is refused like a
string or None, by the local and the remote manager (moto S3 on 127.0.0.1): it is never a
value a user means, and stored as 1.0 it would rank checkpoints silently."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet.checkpoint import CheckpointManager
from scramjet.checkpoint.remote import RemoteCheckpointManager

BOOLS = [True, False, np.bool_(True), np.array(True), torch.tensor(True), torch.tensor([False])]


@pytest.mark.parametrize("value", BOOLS, ids=repr)
def test_local_manager_refuses_a_bool_metric(tmp_path: Path, value: object) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2)
    with pytest.raises(TypeError, match=r"metric 'loss' must be a number.*bool"):
        manager.save({"w": torch.zeros(2)}, step=0, metrics={"loss": value})
    assert list(tmp_path.glob("ckpt-*.pt")) == []
    # numbers are still accepted, including one-element tensors and arrays (no warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        metrics = {"loss": torch.tensor(0.5), "n": 3, "acc": np.array([0.25])}
        manager.save({"w": torch.zeros(2)}, step=1, metrics=metrics)


def test_remote_manager_refuses_a_bool_metric(s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    bucket = s3.new_bucket()
    manager = RemoteCheckpointManager(f"s3://{bucket}/ckpt", tmp_path, keep_last=2)
    try:
        with pytest.raises(TypeError, match=r"metric 'acc' must be a number.*bool"):
            manager.save({"w": torch.zeros(2)}, step=0, metrics={"acc": True})
    finally:
        manager.close()
    assert [k for k in s3.list_keys(bucket) if "/ckpt-" in k] == []
