"""A data-bound run whose first steps are fast (the DataLoader's workers had batches ready)
and whose later steps are slow still stops within about two seconds of a stop asked in the
middle: on ``SIGTERM`` to the launcher both ranks save at one step and exit with 143, long
before torchrun's ``SIGKILL`` (30 s after it forwards the signal); a callback's stop on one
rank is taken by both within about a second of steps. (torchrun, 2 processes, gloo on CPU;
steps of about 0.1 s after the first few: see ``slow_data_stop_job.py``.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.common.torchrun import free_port

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("slow_data_stop_job.py"))
START_LIMIT_S = 120  # until rank 0 reaches the step the test acts at (a loaded machine)
EXIT_LIMIT_S = 28  # from the signal to the launcher's exit; torchrun kills at 30 s
# The docs promise about 2 s (20 steps of 0.1 s); room for a loaded machine's jitter.
MAX_STEPS_AFTER, MAX_SECONDS_AFTER = 25, 6.0
EXIT_AFTER_RECORD_S = 5.0  # from the job's last line to the launcher's exit
STOP_AT = 15  # rank 1's callback raises its stop after this update (the job's STOP_AT)


def _start(out: Path, mode: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--master-port", str(free_port()), JOB, str(out), mode]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def _step(out: Path, rank: int) -> int:
    try:
        return int((out / f"step{rank}").read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return 0


def _wait(agent: subprocess.Popen[str], limit_s: float) -> str:
    """The launcher's stderr once it exits (its whole group killed after ``limit_s``)."""
    try:
        return agent.communicate(timeout=limit_s)[1]
    except subprocess.TimeoutExpired:
        os.killpg(agent.pid, signal.SIGKILL)
        err = agent.communicate()[1]
        pytest.fail(f"the run did not end within {limit_s} s: {err[-3000:]}")


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def _reach(agent: subprocess.Popen[str], out: Path, step: int) -> int:
    deadline = time.monotonic() + START_LIMIT_S
    while _step(out, 0) < step:
        if agent.poll() is not None:
            pytest.fail(f"the run ended before step {step}: {agent.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(agent.pid, signal.SIGKILL)
            pytest.fail(f"the run did not reach step {step} in {START_LIMIT_S} s")
        time.sleep(0.01)
    return _step(out, 0)


def test_sigterm_saves_within_seconds_when_the_first_steps_were_fast(tmp_path: Path) -> None:
    agent = _start(tmp_path, "signal")
    signalled = _reach(agent, tmp_path, 12)  # steps take about 0.1 s by now
    sent = time.time()
    agent.send_signal(signal.SIGTERM)  # what a scheduler does to the launcher
    _wait(agent, EXIT_LIMIT_S)
    ended = time.time()
    r0, r1 = _records(tmp_path)
    assert r0["error"] == r1["error"] == "TrainingPreempted", (r0, r1)
    # the epoch's loader workers are stopped as the epoch is left: torch waited 5 s for
    # each at the process's end (10 s with 2 workers), past its last line
    assert ended - max(r0["time"], r1["time"]) < EXIT_AFTER_RECORD_S, (ended, r0, r1)
    assert r0["code"] == r1["code"] == 143, (r0, r1)  # each rank's exit status
    assert r0["step"] == r1["step"], (r0, r1)  # one step on both ranks
    assert signalled <= r0["step"] <= signalled + MAX_STEPS_AFTER, (signalled, r0, r1)
    assert max(r0["time"], r1["time"]) - sent < MAX_SECONDS_AFTER, (sent, r0, r1)
    saved = sorted(p.name for p in (tmp_path / "ckpt").glob("*.pt"))
    assert saved and saved[-1].endswith(f"-step{r0['step']}.pt"), saved


def test_a_stop_on_one_rank_is_taken_soon_when_the_first_steps_were_fast(tmp_path: Path) -> None:
    agent = _start(tmp_path, "one_rank_stop")
    _reach(agent, tmp_path, 1)
    err = _wait(agent, START_LIMIT_S)
    assert agent.returncode == 0, err[-3000:]
    r0, r1 = _records(tmp_path)
    assert r0["step"] == r1["step"], (r0, r1)  # one step on both ranks
    assert STOP_AT <= r0["step"] <= STOP_AT + MAX_STEPS_AFTER, (r0, r1)
    assert r1["reason"] == f"rank 1 stops after update {STOP_AT}", r1
    assert r0["reason"].startswith("rank 1 stopped the run at step"), r0
