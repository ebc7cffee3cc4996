"""Real two-process runs (gloo on CPU) through torchrun, `scramjet launch` and `launch()`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dist_worker
import pytest

from scramjet.runtime import LaunchError, launch

pytestmark = pytest.mark.distributed

WORKER = str(Path(__file__).with_name("dist_worker.py"))
RUN_LIMIT_S = 60  # a hang would hit this; every run below must finish well within it
N = dist_worker.NUM_SAMPLES


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(cmd: list[str], **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    start = time.monotonic()
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=full_env, check=False
    )
    return done, time.monotonic() - start


def torchrun(mode: str, out: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--master-port", str(free_port()), WORKER, mode, str(out)]
    return run(cmd, **env)


def scramjet_launch(mode: str, out: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    cmd = [sys.executable, "-m", "scramjet.cli", "launch", "--nproc-per-node", "2"]
    return run([*cmd, WORKER, mode, str(out)])


def check_rank_view(seen: dict[str, Any], rank: int) -> None:
    assert seen["env"] == [rank, 2, rank, 2]
    assert (seen["rank"], seen["world"], seen["distributed"]) == (rank, 2, True)
    assert seen["main"] is (rank == 0) and seen["backend"] == "gloo"
    assert seen["mean"] == [1.5, 15.0] and seen["sum"] == [3.0, 30.0] and seen["max"] == [2.0, 20.0]
    assert seen["input_unchanged"] == [rank + 1.0, 10.0 * (rank + 1)]
    assert seen["gather"] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]  # rank 0: 1 row, rank 1: 2 rows
    assert seen["gather_padded"] == [[1, -100], [2, 2]]  # later dims padded on request
    assert "differ after the first dimension ([[1, 1], [1, 2]] by rank)" in seen["gather_ragged"]
    assert seen["gather_object"] == [{"rank": 0, "word": "a"}, {"rank": 1, "word": "b"}]
    assert seen["broadcast"] == "from-0"
    assert seen["local_count"] == 17  # 33 samples on 2 ranks: each sees 17, one is padding
    expected = [2 * i for i in range(N)]
    assert seen["eval"] == expected and seen["eval_objects"] == expected


def check_outputs(out: Path) -> None:
    for rank in (0, 1):
        check_rank_view(json.loads((out / f"rank{rank}.json").read_text()), rank)


def test_torchrun_runs_the_helpers(tmp_path: Path) -> None:
    done, _ = torchrun("ok", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    check_outputs(tmp_path)


@pytest.mark.slow  # the default run has the Trainer's: test_a_rank_that_raises_ends_the_run_with_its_error
def test_torchrun_rank_error_ends_the_run(tmp_path: Path) -> None:
    done, elapsed = torchrun("raise", tmp_path)
    assert done.returncode != 0
    assert "ValueError: rank one exploded on purpose" in done.stderr
    assert elapsed < 30
    assert not list(tmp_path.glob("rank*.json"))  # rank 0 never got past its barrier


@pytest.mark.slow  # the default suite checks the same timeout through the Trainer
def test_stuck_rank_ends_with_a_timeout_error(tmp_path: Path) -> None:
    # (tests/distributed/test_dist_trainer.py::test_a_stuck_rank_ends_the_run_at_the_timeout)
    done, elapsed = torchrun("hang", tmp_path, SCRAMJET_DIST_TIMEOUT="3")
    assert done.returncode != 0
    assert "Timed out" in done.stderr, done.stderr[-3000:]
    assert elapsed < 30  # rank 1 sleeps 120 s: the 3 s timeout ended the run


def test_scramjet_launch_runs_the_helpers(tmp_path: Path) -> None:
    done, _ = scramjet_launch("ok", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    check_outputs(tmp_path)


def test_scramjet_launch_reports_rank_and_error(tmp_path: Path) -> None:
    done, elapsed = scramjet_launch("raise", tmp_path)
    assert done.returncode == 1
    assert "scramjet launch: rank 1 failed: ValueError: rank one exploded on purpose" in done.stderr
    assert elapsed < 30


def test_launch_function_returns_rank_zero_result(tmp_path: Path) -> None:
    result = launch(dist_worker.main, nprocs=2, args=("ok", str(tmp_path)))
    check_rank_view(result, 0)
    check_outputs(tmp_path)


def test_launch_function_raises_with_rank_and_message(tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch(dist_worker.main, nprocs=2, args=("raise", str(tmp_path)))
    assert info.value.rank == 1
    assert info.value.message == "ValueError: rank one exploded on purpose"
    assert "dist_worker.py" in info.value.traceback
    assert str(info.value).startswith("rank 1 failed: ValueError: rank one exploded on purpose")
    assert time.monotonic() - start < 30
