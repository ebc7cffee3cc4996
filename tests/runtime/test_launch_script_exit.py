"""`scramjet launch train.py`: a rank that leaves with ``sys.exit(n)`` is the one named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import sys
import torch
from scramjet.runtime import get_rank, init_distributed, reduce

init_distributed()
if get_rank() == 1:
    sys.exit({code})  # say, its own check of its arguments
print(float(reduce(torch.tensor(1.0))))
"""


@pytest.mark.distributed
@pytest.mark.parametrize("code", [3, "'bad --lr: expected a number'"])
def test_the_rank_that_called_sys_exit_is_named(tmp_path: Path, code: object) -> None:
    # Before: rank 1 left with no record, its exit closed the group, rank 0 failed on
    # 'Connection closed by peer' and the summary named rank 0 and that error.
    (tmp_path / "train.py").write_text(SCRIPT.format(code=code))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SCRAMJET_DIST_TIMEOUT": "20"}
    done = subprocess.run(
        [sys.executable, "-m", "scramjet.cli", "launch", "--nproc-per-node=2", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    summary = [line for line in done.stderr.splitlines() if line.startswith("scramjet launch:")]
    assert len(summary) == 1, done.stderr[-3000:]
    assert "rank 1" in summary[0], summary[0]
    assert "sys.exit(" in summary[0] and str(code).strip("'") in summary[0], summary[0]


def test_failures_in_the_same_second_are_ordered_by_their_error_files(tmp_path: Path) -> None:
    # torch orders failures by whole-second timestamps, and a tie named the lowest rank:
    # rank 0, which failed only because rank 1 had gone.
    import json
    import time

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from scramjet.runtime.launch import _launch_error

    second = int(time.time())
    failures = {}
    for rank, (offset, message) in enumerate([(0.6, "peer closed"), (0.2, "rank 1 gave up")]):
        path = tmp_path / f"error{rank}.json"
        record = {"message": message, "extraInfo": {"timestamp": str(second)}}
        path.write_text(json.dumps({"message": record}))
        os.utime(path, (second + offset, second + offset))
        failures[rank] = ProcessFailure(
            local_rank=rank, pid=100 + rank, exitcode=1, error_file=str(path)
        )
    assert failures[0].timestamp == failures[1].timestamp == second  # torch's tie
    error = _launch_error(ChildFailedError("train.py", failures))
    assert error.rank == 1
    assert "rank 1 gave up" in error.message


def test_a_rank_stopped_after_recording_its_error_is_still_named(tmp_path: Path) -> None:
    # The agent reports the first process it sees end and stops the others: under load,
    # rank 0 (which lost its connection when rank 1's error closed the group) ended first,
    # and rank 1, whose error file was already written, went unnamed.
    import json

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from scramjet.runtime.launch import _launch_error

    attempt = tmp_path / "attempt_0"
    for rank, (when, message) in enumerate(
        [(20.0, "RuntimeError: Connection closed by peer"), (10.0, "train called sys.exit(3)")]
    ):
        path = attempt / str(rank) / "error.json"
        path.parent.mkdir(parents=True)
        extra = {"py_callstack": f"trace {rank}", "timestamp": str(int(when))}
        record = {"message": message, "extraInfo": extra}
        path.write_text(json.dumps({"message": record}))
        os.utime(path, (when, when))
    reported = {
        0: ProcessFailure(
            local_rank=0, pid=100, exitcode=1, error_file=str(attempt / "0" / "error.json")
        )
    }
    error = _launch_error(ChildFailedError("train", reported))
    assert error.rank == 1, str(error)
    assert "sys.exit(3)" in error.message and "trace 1" in str(error)
    assert "Connection closed by peer" in error.failures[0]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_rank_the_launcher_stopped_is_named_after_the_rank_that_failed(
    tmp_path: Path, signum: signal.Signals
) -> None:
    # Rank 0 timed out waiting for a stuck rank 1, and the launcher then stopped rank 1
    # with SIGTERM in the same second. torch stamps rank 1's end in whole seconds, earlier
    # than rank 0's error file within that second: rank 1 was named. A rank killed by
    # SIGKILL (the kernel's out-of-memory killer) is a cause, and stays first.
    import json
    import time

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from scramjet.runtime.launch import _launch_error

    second = int(time.time())
    path = tmp_path / "error0.json"
    extra = {"timestamp": str(second)}
    record = {"message": "RuntimeError: Timed out waiting 3000ms", "extraInfo": extra}
    path.write_text(json.dumps({"message": record}))
    os.utime(path, (second + 0.7, second + 0.7))
    failures = {
        0: ProcessFailure(local_rank=0, pid=100, exitcode=1, error_file=str(path)),
        1: ProcessFailure(
            local_rank=1, pid=101, exitcode=-signum, error_file=str(tmp_path / "none.json")
        ),
    }
    failures[1].timestamp = second  # stamped in the same second as rank 0's error
    error = _launch_error(ChildFailedError("train.py", failures))
    if signum == signal.SIGTERM:
        assert error.rank == 0, str(error)
        assert "Timed out" in error.message
        assert error.failures[1] == "killed by SIGTERM"
    else:
        assert error.rank == 1, str(error)
        assert error.message == "killed by SIGKILL"
