"""Streams of unknown length that hold different numbers of batches on different ranks end
each epoch together (the shortest stream decides), instead of leaving one rank waiting in
the gradient all-reduce while the other has stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.common.torchrun import run_torchrun

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("uneven_stream_job.py"))


def test_uneven_streams_end_the_epoch_together(tmp_path: Path) -> None:
    done = run_torchrun(JOB, str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    # Rank 1 has 4 batches per epoch, rank 0 has 7: both make 4 updates per epoch.
    assert r0["global_step"] == r1["global_step"] == 8
    assert r0["weights"] == r1["weights"]  # the same updates: DDP kept them in step
    # Per epoch: one all-reduce per batch of the shorter stream and one at its end, then
    # the epoch's loss and its stop vote; none doubled by reduce()'s shape check. Once per
    # run: the flag with which the ranks agree that each could read rank 0's drawn seed
    # (gather_object), the vote on a stop held at the run's start, and the two votes on a
    # held stop at updates (the first and the third; the next is minutes away).
    per_epoch = (4 + 1) + 2
    per_run = 1 + 1 + 2
    assert r0["issued"] == r1["issued"] <= 2 * per_epoch + per_run, (r0["issued"], r1["issued"])
