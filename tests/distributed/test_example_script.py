"""examples/distributed_train.py runs unchanged in 1 process, under torchrun (one node and
two "nodes" on this machine) and under `scramjet launch`, and resumes from its checkpoints."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.distributed

SCRIPT = str(Path(__file__).resolve().parents[2] / "examples" / "distributed_train.py")
RUN_LIMIT_S = 90
STEPS_PER_EPOCH = {1: 16, 2: 8}  # 512 samples, 16 per process, accumulation 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=env(), check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())


def check(out: Path, processes: int, epochs: int = 2) -> None:
    """The summary rank 0 wrote."""
    got = summary(out)
    assert got["processes"] == processes
    assert got["optimizer_steps"] == epochs * STEPS_PER_EPOCH[processes]
    assert got["predictions"] == 33  # 33 samples, never padded
    assert got["eval_accuracy"] > 0.8


def torchrun_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *args]


def test_one_process(tmp_path: Path) -> None:
    done = run([sys.executable, SCRIPT, "--out", str(tmp_path)])
    check(tmp_path, 1)
    assert done.stdout.count("epoch 1 |") == 1


@pytest.mark.slow  # two-process training and resume: tests/distributed/test_dist_trainer.py
def test_torchrun_two_processes_then_resume(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path)]
    two = ["--nproc-per-node", "2"]
    done = run(torchrun_cmd(*two, "--master-port", str(free_port()), SCRIPT, *out))
    check(tmp_path, 2)
    assert done.stdout.count("epoch 1 |") == 1  # metrics printed by rank 0 only
    # Resume from the latest checkpoint (end of epoch 2) and train one more epoch.
    more = ["--epochs", "3", "--resume"]
    done = run(torchrun_cmd(*two, "--master-port", str(free_port()), SCRIPT, *out, *more))
    check(tmp_path, 2, epochs=3)
    assert "epoch 1 |" not in done.stdout and done.stdout.count("epoch 3 |") == 1


@pytest.mark.slow
def test_scramjet_launch_two_processes(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "scramjet.cli", "launch", "--nproc-per-node", "2", SCRIPT]
    run([*cmd, "--out", str(tmp_path), "--epochs", "2"])
    check(tmp_path, 2)


@pytest.mark.slow
def test_torchrun_two_nodes_one_process_each(tmp_path: Path) -> None:
    port = str(free_port())
    shared = ["--nnodes", "2", "--nproc-per-node", "1", "--master-addr", "127.0.0.1"]
    script = [SCRIPT, "--out", str(tmp_path), "--epochs", "2"]
    nodes = [
        subprocess.Popen(
            torchrun_cmd(*shared, "--master-port", port, "--node-rank", str(rank), *script),
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    for node in nodes:
        _, err = node.communicate(timeout=RUN_LIMIT_S)
        assert node.returncode == 0, err[-4000:]
    check(tmp_path, 2)
