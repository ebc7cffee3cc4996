"""Run a script in real processes under ``torchrun`` (gloo on CPU), as the tests do."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any


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


def run_worker(source: str, folder: Path, *, nproc: int = 2, timeout: float = 60) -> list[Any]:
    """Write ``source`` to ``folder/worker.py``, run it under torchrun with ``folder`` as its
    argument (it must exit 0), and return what each rank wrote to ``folder/rank{r}.json``."""
    script = folder / "worker.py"
    script.write_text(source)
    done = run_torchrun(script, str(folder), nproc=nproc, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(nproc)]
