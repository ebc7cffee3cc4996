"""A single-process Trainer script scaled to several processes, and the failures it meets:
plain ``torchrun --max-restarts``, ranks that disagree about their data, iterable datasets
predicted across processes."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tests.common.torchrun import free_port

from scramjet.cli import main as scramjet_main
from scramjet.runtime import cli as launch_cli
from scramjet.runtime import distributed as sdist

pytestmark = pytest.mark.distributed

HERE = Path(__file__).resolve().parent


def _torchrun(script: Path, *args: str, restarts: int = 0, timeout: float = 120) -> str:
    """``python -m torch.distributed.run`` with 2 processes; returns its output, which the
    assertion messages show."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--max-restarts", str(restarts), "--master-port", str(free_port())]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SCRAMJET_DIST_TIMEOUT": "30"}
    env.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)  # torchrun's default: a shared store
    done = subprocess.run(
        [*cmd, str(script), *args], capture_output=True, text=True, env=env, timeout=timeout
    )
    return f"exit status {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


@pytest.mark.slow
def test_plain_torchrun_restart_resumes_after_a_rank_is_killed(tmp_path: Path) -> None:
    # torchrun shares its agent's store with every round of workers, keys of the killed
    # round included: the restarted rank 1 used to read rank 0's old address and fail
    # with "connectFullMesh ... Connection refused" (or wait on it until the timeout).
    report = _torchrun(HERE / "scale_restart_job.py", str(tmp_path), restarts=1)
    assert report.startswith("exit status 0"), report
    assert (tmp_path / "killed").exists(), report
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert r0["restart"] == r1["restart"] == 1
    assert r0["resumed_at"] == r1["resumed_at"] == 4  # the newest checkpoint before step 5
    assert r0["step"] == r1["step"] == 8  # 64 samples, 2 x 8 per step, 2 epochs
    for name, value in r0["weights"].items():
        assert torch.equal(value, r1["weights"][name]), name


def _launch_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    launch_cli.configure_parser(parser)
    return parser.parse_args(argv)


def _agent_env(monkeypatch: pytest.MonkeyPatch, port: int, **extra: str) -> None:
    """The variables torchrun's agent gives a worker when it shares its store."""
    values = {
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "GROUP_WORLD_SIZE": "1",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "1",
        **extra,
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def test_each_restart_round_reads_its_own_keys_of_the_agents_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = torch.distributed.TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False)
    env = sdist.DistEnv(rank=0, world_size=1)
    _agent_env(monkeypatch, agent.port, TORCHELASTIC_RESTART_COUNT="0")
    first = sdist._round_store(env, 5.0)
    assert first is not None
    first.set("rank_0", b"address of the killed round")
    _agent_env(monkeypatch, agent.port, TORCHELASTIC_RESTART_COUNT="1")
    second = sdist._round_store(env, 5.0)
    assert second is not None
    assert not second.check(["rank_0"])  # the killed round's address is not visible
    second.set("rank_0", b"new address")
    assert first.get("rank_0") == b"address of the killed round"


def test_no_store_of_its_own_without_a_shared_agent_store_or_across_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = sdist.DistEnv(rank=0, world_size=2)
    _agent_env(monkeypatch, 1, TORCHELASTIC_USE_AGENT_STORE="False")
    assert sdist._round_store(env, 5.0) is None  # scramjet launch: a fresh store per round
    _agent_env(monkeypatch, 1, GROUP_WORLD_SIZE="2")
    with pytest.warns(UserWarning, match="TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"):
        assert sdist._round_store(env, 5.0) is None  # counts can differ between nodes
    _agent_env(monkeypatch, 1, GROUP_WORLD_SIZE="2", TORCHELASTIC_MAX_RESTARTS="0")
    assert sdist._round_store(env, 5.0) is None  # no restart, nothing to warn about


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # A c10d rendezvous without its endpoint used to become a static rendezvous on
        # --master-addr with --node-rank 0 on every machine: each node waits for the others.
        (
            ["--nnodes", "2", "--rdzv-backend", "c10d", "--master-addr", "10.0.0.1"],
            "--rdzv-backend c10d needs --rdzv-endpoint",
        ),
        (["--nnodes", "2", "--rdzv-id", "job1", "--master-addr", "10.0.0.1"], "--rdzv-id job1"),
        (["--standalone", "--nnodes", "2", "--master-addr", "10.0.0.1"], "--standalone"),
        (["--max-restarts", "-1"], "--max-restarts must be >= 0"),
    ],
)
def test_launch_options_it_would_ignore_are_refused(args: list[str], message: str) -> None:
    # Checked on the translated command line: the old behaviour starts the launcher,
    # which waits for nodes that never come. `scramjet launch` prints the ValueError's
    # message in one line and exits with status 2.
    with pytest.raises(ValueError, match=re.escape(message)):
        launch_cli.build_torchrun_argv(_launch_args([*args, "train.py"]))


def test_launch_keeps_an_explicit_static_rendezvous_and_the_usual_forms() -> None:
    static = ["--nnodes", "2", "--rdzv-backend", "static", "--master-addr", "10.0.0.1", "t.py"]
    argv = launch_cli.build_torchrun_argv(_launch_args(static))
    assert "--master-addr=10.0.0.1" in argv and "--node-rank=0" in argv
    assert "--standalone" in launch_cli.build_torchrun_argv(_launch_args(["--standalone", "t.py"]))


def test_a_refused_launch_option_is_one_line_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    assert scramjet_main(["launch", "--max-restarts", "-1", str(script)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err


DATA_JOB = HERE / "scale_data_job.py"


@pytest.mark.slow
def test_predict_on_an_iterable_dataset_across_processes_is_complete_or_refused(
    tmp_path: Path,
) -> None:
    report = _torchrun(DATA_JOB, "stream_predict", str(tmp_path))
    assert report.startswith("exit status 0"), report
    for rank in (0, 1):
        result = torch.load(tmp_path / f"rank{rank}.pt")
        if "error" in result:  # refused: the message must say why and what to do
            assert "IterableDataset" in result["error"], result["error"]
            assert "one process" in result["error"], result["error"]
        else:  # or every sample once, in stream order
            torch.testing.assert_close(result["outputs"], result["expected"])


@pytest.mark.slow
def test_ranks_with_different_dataset_lengths_fail_with_a_message_naming_both(
    tmp_path: Path,
) -> None:
    report = _torchrun(DATA_JOB, "uneven_lengths", str(tmp_path))
    assert not report.startswith("exit status 0"), report
    assert "101" in report and "60" in report and "len" in report, report
    assert "SIGABRT" not in report and "Signal 6" not in report, report


@pytest.mark.slow
def test_auto_resume_from_a_folder_other_machines_cannot_see_says_so(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.run(
        [sys.executable, str(DATA_JOB), "node_local_resume", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    report = _torchrun(DATA_JOB, "node_local_resume", str(tmp_path))
    assert not report.startswith("exit status 0"), report
    assert "rank 1" in report and "every machine" in report, report
