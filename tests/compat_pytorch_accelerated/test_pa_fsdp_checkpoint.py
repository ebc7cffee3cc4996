"""The pytorch-accelerated Trainer's ``save_checkpoint`` / ``load_checkpoint`` with a model
sharded by FSDP2 (torchrun, 2 processes, gloo on CPU): the file loads into another
sharded model and optimizer, weights and momentum included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import run_torchrun

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("pa_fsdp_job.py"))


def test_load_checkpoint_restores_a_sharded_model_and_optimizer(tmp_path: Path) -> None:
    done = run_torchrun(JOB, "load", str(tmp_path), timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = torch.load(tmp_path / "result.pt", weights_only=False)
    trained, loaded = result["trained"], result["loaded"]
    assert trained["weights"].keys() == loaded["weights"].keys()
    for key, value in trained["weights"].items():
        assert torch.equal(loaded["weights"][key], value), key
    momentum = trained["optimizer"]["state"]
    assert len(momentum) == 4
    for i, state in momentum.items():
        assert torch.equal(
            loaded["optimizer"]["state"][i]["momentum_buffer"], state["momentum_buffer"]
        )
    assert torch.equal(loaded["predictions"], trained["predictions"])
