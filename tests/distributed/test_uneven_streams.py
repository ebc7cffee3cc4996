"""Streams of unknown length that hold different numbers of batches on different ranks end
each epoch together (the shortest stream decides), instead of leaving one rank waiting in
the gradient all-reduce while the other has stopped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.distributed.test_example_script import free_port

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("uneven_stream_job.py"))


def test_uneven_streams_end_the_epoch_together(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    cmd += ["--master-port", str(free_port()), JOB, str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    # Rank 1 has 4 batches per epoch, rank 0 has 7: both make 4 updates per epoch.
    assert r0["global_step"] == r1["global_step"] == 8
    assert r0["weights"] == r1["weights"]  # the same updates: DDP kept them in step
