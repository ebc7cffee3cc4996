"""``scramjet launch --nnodes 2`` where the second node never joins the c10d rendezvous:
the one agent that did start must end after a join timeout the user can set, with a message
naming the missing node(s) and that setting, not a bare RendezvousTimeoutError."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.common.torchrun import free_port

pytestmark = pytest.mark.distributed


def test_a_node_that_never_joins_ends_the_launch_with_a_clear_message(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("print('started')\n")
    cmd = [sys.executable, "-m", "scramjet.cli", "launch", "--nnodes", "2", "--node-rank", "0"]
    cmd += ["--nproc-per-node", "1", "--rdzv-backend", "c10d"]
    cmd += ["--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-conf", "join_timeout=3"]
    start = time.monotonic()
    done = subprocess.run(
        [*cmd, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    seconds = time.monotonic() - start
    assert done.returncode != 0 and "started" not in done.stdout
    err = done.stderr
    assert "2 node(s) must join the rendezvous" in err and "join timeout of 3 s" in err, err
    assert "--rdzv-conf join_timeout=SECONDS" in err, err
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert 3 <= seconds < 30, seconds
