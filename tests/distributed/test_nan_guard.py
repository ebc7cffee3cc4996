"""TerminateOnNaNCallback under torchrun: a NaN loss seen by one rank stops every rank at
the same step (the check is one collective per group of steps), so no rank is left
waiting in a collective for a peer that has stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.common.torchrun import run_torchrun

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("nan_job.py"))


def test_nan_on_one_rank_stops_all_ranks_together(tmp_path: Path) -> None:
    done = run_torchrun(JOB, str(tmp_path), timeout=90)
    assert done.returncode == 0, done.stderr[-4000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert "loss is nan at batch 5 of epoch 1" in r1["error"], r1
    assert "another process saw a non-finite loss" in r0["error"], r0
    # 160 samples, 2 ranks, batch 4: 20 batches per rank per epoch. Checked every 4 batches,
    # so both stop at the end of batch 8 (the group holding batch 5), before batch 8's
    # optimizer step: 7 updates applied on each rank.
    assert r0["global_step"] == r1["global_step"] == 7
