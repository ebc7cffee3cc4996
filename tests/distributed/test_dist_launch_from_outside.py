"""A user's distributed script checked from outside: launcher environments, launch
commands and failures, checked in real processes (gloo on CPU)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(PYTHONPATH=str(ROOT / "src"), SCRAMJET_DIST_TIMEOUT="5", **extra)
    return env


def _python(
    code: str, env: dict[str, str], timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_world_size_without_rank_is_refused_at_once_naming_rank() -> None:
    # Before: every process took rank 0, waited the whole timeout for the others and
    # ended with torch's 'Timed out ... waiting for clients. 1/2 clients joined'.
    env = _env(WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29681")
    env["SCRAMJET_DIST_TIMEOUT"] = "60"  # a wait would show as a timeout of this test
    done = _python("from scramjet.runtime import init_distributed; init_distributed()", env, 45)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "WORLD_SIZE=2 but RANK is not set" in last and "scramjet launch" in last, last


def test_rank_without_world_size_says_world_size_is_unset() -> None:
    from scramjet.runtime.distributed import read_env

    with pytest.raises(ValueError, match=r"RANK=1 and WORLD_SIZE=1 \(WORLD_SIZE is not set\)"):
        read_env({"RANK": "1"})


def test_launch_on_a_port_in_use_says_how_to_fix(tmp_path: Path) -> None:
    # Before: torch's 'EADDRINUSE ... address already in use' and nothing on what to do.
    script = tmp_path / "train.py"
    script.write_text("print('never reached')\n")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        command = [sys.executable, "-m", "scramjet", "launch", "--nnodes", "2"]
        command += ["--node-rank", "0", "--nproc-per-node", "1", "--master-addr", "127.0.0.1"]
        command += ["--master-port", str(port), str(script)]
        done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=90)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "address already in use" in last, last
    assert f"The port of --master-port {port} is taken on this machine" in last, last
    assert "pass another free port with --master-port" in last, last


def _torchrun(job: str, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node", "2", str(Path(__file__).with_name(job)), *args]
    return subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=timeout)


def test_predict_one_sample_on_two_ranks(tmp_path: Path) -> None:
    done = _torchrun("small_predict_job.py", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        saved = torch.load(tmp_path / f"rank{rank}.pt")
        assert saved["pred"].shape == (1, 2)
        assert torch.allclose(saved["pred"], saved["expected"])
        assert torch.allclose(saved["both"]["logits"], saved["expected"])
        assert saved["both"]["tags"] == ["row of 1"]


def exit_on_rank_one(code: int) -> float:
    """Rank 1 leaves with sys.exit(code) (say, its own argument check) while rank 0 waits
    in a collective."""
    from scramjet.runtime import get_rank, init_distributed, reduce

    init_distributed()
    if get_rank() == 1:
        sys.exit(code)
    return float(reduce(torch.tensor(1.0)))


def test_launch_names_the_rank_that_called_sys_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: rank 1's exit closed the group at exit, rank 0 failed on 'Connection closed
    # by peer' first, and LaunchError named rank 0 only (rank 1 appeared nowhere).
    from scramjet.runtime import LaunchError, launch

    monkeypatch.setenv("SCRAMJET_DIST_TIMEOUT", "20")
    with pytest.raises(LaunchError) as caught:
        launch(exit_on_rank_one, nprocs=2, args=(3,))
    assert caught.value.rank == 1, str(caught.value)
    assert "exit_on_rank_one called sys.exit(3)" in caught.value.message


@pytest.mark.parametrize("value", ["inf", "0"])
def test_bad_timeout_names_the_variable_and_a_good_value(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: 'inf' gave timedelta's 'OverflowError: cannot convert float infinity to
    # integer' and '0' 'must be > 0 seconds, got 0.0', neither naming where it came from.
    from scramjet.runtime.distributed import _timeout_seconds

    monkeypatch.setenv("SCRAMJET_DIST_TIMEOUT", value)
    with pytest.raises(ValueError, match=f"received SCRAMJET_DIST_TIMEOUT='{value}'.*=600"):
        _timeout_seconds(None)
