"""A failure that one rank's callback raises (``StopTrainingError(reraise=True)``) is held
and voted on like any callback stop, but it is not recorded as ``stop_training()``: before,
the other rank's train() returned as after a plain stop, the stop-time checkpoint recorded
it, and a rerun with ``resume_from="auto"`` trained nothing and exited 0 on both ranks. Now
every rank raises it, and the rerun trains on (torchrun, 2 processes, gloo)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.common.torchrun import run_worker

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys
from pathlib import Path
import torch
from torch import nn
from torch.utils.data import TensorDataset
from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback, StopTrainingError, TrainerCallback
from scramjet.runtime import distributed as dist

class LastRankGivesUp(TrainerCallback):
    def __init__(self, armed):
        self.armed = armed

    def on_optimizer_step_end(self, trainer, **kwargs):
        last = dist.get_rank() == dist.get_world_size() - 1
        if self.armed and last and trainer.state.global_step == 3:
            raise StopTrainingError("the last rank gave up", reraise=True)

def run(out, armed, resume):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    trainer = Trainer(model, nn.functional.cross_entropy,
                      torch.optim.SGD(model.parameters(), lr=0.1),
                      callbacks=[LastRankGivesUp(armed), SaveTrainingStateCallback(out / "saves")],
                      seed=0)
    raised = None
    try:
        trainer.train(data, num_epochs=2, per_device_batch_size=4,
                      resume_from="auto" if resume else None)
    except StopTrainingError as error:
        raised = type(error).__name__
    return [raised, trainer.state.global_step, trainer.state.stop_requested]

out = Path(sys.argv[1])
first, rerun = run(out, True, False), run(out, False, True)
(out / f"rank{dist.get_rank()}.json").write_text(json.dumps({"first": first, "rerun": rerun}))
"""


def test_a_failure_held_on_one_rank_is_raised_everywhere_and_never_recorded(
    tmp_path: Path,
) -> None:
    ranks = run_worker(WORKER, tmp_path, timeout=150)
    for record in ranks:
        raised, step, recorded = record["first"]
        assert raised == "StopTrainingError" and not recorded, record  # on both ranks
        assert step == ranks[0]["first"][1], ranks  # at one step
        assert record["rerun"] == [None, 16, False], record  # the rerun trains on
    saved = sorted(p.name for p in (tmp_path / "saves").glob("*.pt"))
    assert not any(name.endswith(f"-step{ranks[0]['first'][1]}.pt") for name in saved), saved
