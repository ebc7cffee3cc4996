"""Two nodes on one machine: two ``scramjet launch --nnodes 2`` agents, one process each,
meeting through torch elastic's c10d rendezvous on 127.0.0.1, train the job of
``test_elastic.py`` together. The result matches one process with the same global batch
within float tolerance, not bitwise: each rank averages the loss over its half of the
batch and DDP averages the two gradients, which sums in another order than one process
averaging all 8 samples (observed differences are around 1e-8)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import free_port
from tests.distributed.test_elastic import (  # noqa: F401  (uninterrupted: a fixture)
    JOB,
    RUN_LIMIT_S,
    STEPS,
    assert_bitwise,
    env,
    launch_cmd,
    read_int,
    results,
    uninterrupted,
)

pytestmark = pytest.mark.distributed


def _two_agents(shared: list[str], job: list[str], limit: float) -> None:
    """Start ``scramjet launch`` as node 0 and node 1 of one run; both must end with 0."""
    agents = [
        subprocess.Popen(
            launch_cmd(*shared, "--node-rank", str(node), *job),
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for node in (0, 1)
    ]
    for agent in agents:
        _, err = agent.communicate(timeout=limit)
        assert agent.returncode == 0, err[-4000:]


@pytest.mark.slow  # 35-45 s on a shared 2-core machine: three interpreter starts, a rendezvous
def test_two_launch_agents_with_c10d_rendezvous_match_one_process(tmp_path: Path) -> None:
    single = tmp_path / "single"
    subprocess.run(
        [sys.executable, JOB, str(single), str(single / "ckpt"), "--batch", "8", "--dropout", "0"],
        env=env(),
        check=True,
        capture_output=True,
        timeout=RUN_LIMIT_S,
    )
    out = tmp_path / "nodes"
    endpoint, run_id = f"127.0.0.1:{free_port()}", uuid.uuid4().hex[:8]
    shared = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d"]
    shared += ["--rdzv-endpoint", endpoint, "--rdzv-id", run_id]
    job = [JOB, str(out), str(out / "ckpt"), "--dropout", "0"]
    _two_agents(shared, job, RUN_LIMIT_S)
    one = results(single, world=1)[0]
    ranks = results(out, world=2)
    assert one["world"] == 1 and all(r["world"] == 2 and r["step"] == STEPS for r in ranks)
    for key, want in one["weights"].items():
        assert torch.equal(ranks[0]["weights"][key], ranks[1]["weights"][key])  # replicas
        torch.testing.assert_close(ranks[0]["weights"][key], want, rtol=0, atol=1e-5)
    got, want = ranks[0]["history"], one["history"]
    assert got.keys() == want.keys()
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)  # train_loss_epoch per epoch
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)  # train_loss_epoch per epoch


@pytest.mark.slow  # 15-40 s: a reference run, two agents, a killed rank, a second round
def test_two_agents_restart_a_killed_rank_and_end_bitwise(
    tmp_path: Path,
    uninterrupted: dict[str, Any],  # noqa: F811  (the fixture imported above)
) -> None:
    """``--max-restarts`` across nodes through the c10d rendezvous (what ``scramjet
    launch`` refuses the static one for): rank 1, on the second agent, dies mid-epoch; both
    agents restart the group, which resumes from its checkpoint and ends bitwise equal to
    an uninterrupted run of 2 processes on one node."""
    out = tmp_path / "nodes"
    endpoint, run_id = f"127.0.0.1:{free_port()}", uuid.uuid4().hex[:8]
    shared = ["--nnodes", "2", "--nproc-per-node", "1", "--max-restarts", "1"]
    shared += ["--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", run_id]
    job = [JOB, str(out), str(out / "ckpt"), "--kill-rank-at", "9"]
    _two_agents(shared, job, 2 * RUN_LIMIT_S)
    assert read_int(out / "killed") == 9
    for rank in results(out):
        assert 0 < rank["started_at"] <= 9 and rank["step"] == STEPS
        assert_bitwise(rank["weights"], uninterrupted["weights"])
