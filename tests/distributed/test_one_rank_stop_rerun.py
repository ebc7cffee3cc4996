"""A stop that one rank's callback decides stops every rank, and is recorded in the
checkpoint whichever rank writes it: the same run again with ``resume_from="auto"`` stops
before any step (torchrun, 2 processes, gloo on CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.common.torchrun import run_torchrun

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("one_rank_stop_job.py"))


def _records(how: str, out: Path) -> tuple[dict[str, object], dict[str, object]]:
    """Run the job (``how`` rank 1 stops) on two ranks; each rank's record of both runs."""
    done = run_torchrun(JOB, how, str(out), timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    r0, r1 = (json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1))
    return r0, r1


def test_stop_decided_on_rank_one_is_kept_by_an_auto_rerun(tmp_path: Path) -> None:
    r0, r1 = _records("raise", tmp_path)
    # 64 samples, 2 ranks, batch 4: 8 updates per epoch; both stop after epoch 1
    assert r0["first_step"] == r1["first_step"] == 8, (r0, r1)
    assert "rank 1 stopped the run after epoch 1" in str(r0["first_reason"]), r0
    assert r0["rerun_step"] == r1["rerun_step"] == 8, (r0, r1)
    assert not r0["rerun_changed"] and not r1["rerun_changed"], (r0, r1)
    assert "stop_training()" in str(r0["rerun_reason"]), r0


def test_early_stop_on_rank_one_is_kept_by_an_auto_rerun(tmp_path: Path) -> None:
    """Rank 0's early stopping, whose count the checkpoint keeps, saw no reason to stop;
    the checkpoint still records the stop rank 1's decided."""
    r0, r1 = _records("early", tmp_path)
    # rank 1's value rises after epoch 2: patience 1 stops both ranks after 2 epochs
    assert r0["first_step"] == r1["first_step"] == 16, (r0, r1)
    assert "rank 1 stopped the run after epoch 2" in str(r0["first_reason"]), r0
    assert r0["rerun_step"] == r1["rerun_step"] == 16, (r0, r1)
    assert not r0["rerun_changed"] and not r1["rerun_changed"], (r0, r1)
