"""Collectives given different inputs on different ranks: real two-process gloo runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys, torch
from pathlib import Path
from scramjet.runtime import barrier, destroy_distributed, gather, get_rank, init_distributed

init_distributed(timeout=20)
rank = get_rank()
seen = {}
# An empty part (nothing to predict on this rank) made as float32; the other is float64.
part = torch.empty(0) if rank == 0 else torch.ones(3, dtype=torch.float64)
try:
    seen["mixed"] = gather(part).tolist()
except ValueError as error:
    seen["mixed"] = str(error)
seen["after"] = gather(torch.full((1,), float(rank))).tolist()  # the group still works
barrier()
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))
destroy_distributed()
"""


def test_gather_of_different_dtypes_is_a_clear_error_on_every_rank(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*cmd, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert "different dtypes" in seen["mixed"], seen
        assert "torch.float32" in seen["mixed"] and "torch.float64" in seen["mixed"]
        assert seen["after"] == [0.0, 1.0]
