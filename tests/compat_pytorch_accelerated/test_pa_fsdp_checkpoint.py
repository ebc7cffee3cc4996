"""The pytorch-accelerated Trainer's ``save_checkpoint`` / ``load_checkpoint`` with a model
sharded by FSDP2 (torchrun, 2 processes, gloo on CPU): the file loads into another
sharded model and optimizer, weights and momentum included; on two nodes, only the main
process writes it (the only one holding the full state dicts)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import free_port, run_torchrun

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


def test_save_per_node_under_fsdp_is_written_by_the_main_process_only(tmp_path: Path) -> None:
    """Two nodes of one process each, each saving to a path of its own (machines without a
    shared file system; 13-19 s: two launch agents and a rendezvous): node 1's first
    process holds no full state, so it writes nothing (it wrote a checkpoint without
    weights), and both nodes are told where the file is."""
    endpoint, run_id = f"127.0.0.1:{free_port()}", uuid.uuid4().hex[:8]
    launch = [sys.executable, "-m", "scramjet.cli", "launch", "--nnodes", "2"]
    launch += ["--nproc-per-node", "1", "--rdzv-backend", "c10d"]
    launch += ["--rdzv-endpoint", endpoint, "--rdzv-id", run_id]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    agents = [
        subprocess.Popen(
            [*launch, "--node-rank", str(node), JOB, "per_node", str(tmp_path)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for node in (0, 1)
    ]
    errors = [agent.communicate(timeout=180)[1] for agent in agents]
    for agent, err in zip(agents, errors, strict=True):
        assert agent.returncode == 0, err[-4000:]
    weights = torch.load(tmp_path / "weights.pt", weights_only=True)
    saved = torch.load(tmp_path / "node0.pt", weights_only=True)["model_state_dict"]
    assert saved.keys() == weights.keys()
    for key, value in weights.items():
        assert torch.equal(saved[key], value), key
    assert not (tmp_path / "node1.pt").exists()
    for err in errors:
        assert "only the main process (on node 0) writes the file" in err
