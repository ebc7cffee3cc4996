"""Run a script in real processes under ``torchrun`` (gloo on CPU), as the tests do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for the rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_torchrun(
    script: str | Path, *args: str, nproc: int = 2, timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    """``python -m torch.distributed.run --nproc-per-node N script args...``, one thread each."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    cmd += ["--master-port", str(free_port()), str(script), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
