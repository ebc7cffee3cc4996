"""StepVote(interval_s=0) votes at every step, as its docs say (its first gap was two
steps whatever the interval)."""

from __future__ import annotations

import os

import pytest
import torch.distributed as tdist
from tests.common.torchrun import free_port

from scramjet.runtime._step_vote import StepVote


@pytest.fixture
def one_process_group():
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    tdist.init_process_group("gloo", rank=0, world_size=1)
    yield
    tdist.destroy_process_group()


@pytest.mark.parametrize("background", [False, True])
def test_an_interval_of_zero_votes_at_every_step(one_process_group, background: bool) -> None:
    vote = StepVote(1, 0.0, background=background)
    checks = []
    for step in range(8):
        if vote.due(step):
            vote.vote(step, [0])
            checks.append(step)
    assert checks == list(range(8)), checks
