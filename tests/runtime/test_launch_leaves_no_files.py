"""``launch()`` cleans up after itself: neither a run that returns nor one whose ranks
raise leaves files in the temp folder. torch's elastic launcher made a ``torchelastic_*``
folder per launch, and torch.multiprocessing a ``pytorch-errorfile-*.pickle`` per failed
rank, and removed neither: a notebook or sweep calling ``launch`` gathered them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.distributed

MODULE = """
import os

def ok(x):
    return int(os.environ["RANK"]) + x

def fails(x):
    raise ValueError(f"bad value {x} on rank {os.environ['RANK']}")
"""

SCRIPT = """
import sys
from scramjet.runtime import LaunchError, launch
import jobs

print("result", launch(jobs.ok, 2, (5,)))
try:
    launch(jobs.fails, 2, (7,))
except LaunchError as error:
    print("failed", error.rank, error.message)
"""


def test_launches_that_return_or_fail_leave_the_temp_folder_empty(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    (tmp_path / "jobs.py").write_text(MODULE)
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "result 5", done.stdout
    failed = [line for line in lines if line.startswith("failed")]
    assert len(failed) == 1, done.stdout
    assert all("ValueError: bad value 7 on rank" in line for line in failed), done.stdout
    # torch's compile cache (made when torch's logger formats the agent's failure report)
    # is meant to outlive the process; anything else is what the launches left.
    left = [name for name in os.listdir(temp) if not name.startswith("torchinductor_")]
    assert sorted(left) == [], done.stderr[-2000:]


def test_the_launch_command_leaves_the_temp_folder_empty(tmp_path: Path) -> None:
    # A failed run: its error records are read, then removed with the launch's folder.
    temp = tmp_path / "temp"
    temp.mkdir()
    script = tmp_path / "job.py"
    script.write_text(
        "import os\nif os.environ['RANK'] == '1':\n    raise ValueError('bad value on rank 1')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "scramjet", "launch", "--nproc-per-node", "2", str(script)],
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    assert "rank 1 failed: ValueError: bad value on rank 1" in done.stderr, done.stderr
    left = [name for name in os.listdir(temp) if not name.startswith("torchinductor_")]
    assert sorted(left) == [], done.stderr[-2000:]
