"""A stop asked for on one rank only (a callback's ``StopTrainingError`` in a step event, in
evaluation or at the run's start; ``trainer.stop_training()`` at an epoch's end) is taken by
every rank at the same optimizer step: no rank is left waiting in a collective
until the process group's timeout (torchrun, 2 processes, gloo on CPU; the job's timeout is
20 s, so a rank left waiting fails the job)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.common.torchrun import run_torchrun

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("mid_epoch_stop_job.py"))
MODES = (
    "raise_step",
    "raise_update",
    "every_rank",
    "raise_eval",
    "stop_epoch_end",
    "raise_run_start",
)
PER_EPOCH = 64  # 512 samples, 2 ranks, batch 4
AT = 5  # rank 1 asks at this batch / update of the first epoch


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("mid_epoch_stop")
    done = run_torchrun(JOB, str(out), *MODES, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    return {mode: [ranks[0][mode], ranks[1][mode]] for mode in MODES}


def _same_end(mode: dict[str, list[dict[str, Any]]], name: str) -> int:
    r0, r1 = mode[name]
    assert r0["step"] == r1["step"], (name, r0, r1)
    assert r0["weights"] == r1["weights"], (name, r0, r1)
    return int(r0["step"])


@pytest.mark.parametrize("mode", ["raise_step", "raise_update"])
def test_a_callback_stop_in_a_step_event_stops_both_ranks_at_one_step(records, mode) -> None:
    step = _same_end(records, mode)
    assert AT <= step < PER_EPOCH, records[mode]  # after the ask, inside the first epoch
    r0, r1 = records[mode]
    assert r0["reason"] == (
        f"rank 1 stopped the run at step {step} (epoch 1); every rank stops with it"
    ), r0
    assert r1["reason"].startswith("rank 1 stops"), r1  # its own callback's error
    assert r0["train_epochs"] == r1["train_epochs"] == 0  # left inside the epoch, as alone


def test_a_stop_raised_on_every_rank_alike_is_taken_at_once(records) -> None:
    assert _same_end(records, "every_rank") == AT, records["every_rank"]
    for rank in records["every_rank"]:
        assert rank["reason"] == "every rank stops after update 5", rank


def test_a_stop_raised_in_evaluation_stops_both_after_the_epoch(records) -> None:
    assert _same_end(records, "raise_eval") == PER_EPOCH
    r0, r1 = records["raise_eval"]
    assert r0["reason"] == "rank 1 stopped the run after epoch 1; every rank stops with it"
    assert r1["reason"] == "rank 1 stops in evaluation"


def test_stop_training_at_the_epoch_end_stops_both(records) -> None:
    assert _same_end(records, "stop_epoch_end") == PER_EPOCH
    for rank in records["stop_epoch_end"]:
        assert rank["train_epochs"] == 1 and rank["stop_requested"], rank


def test_a_stop_at_the_run_start_on_one_rank_stops_both_before_a_step(records) -> None:
    assert _same_end(records, "raise_run_start") == 0
    r0, r1 = records["raise_run_start"]
    assert r0["reason"] == "rank 1 stopped the run at its start; every rank stops with it"
    assert r1["reason"] == "rank 1 stops at the start"
