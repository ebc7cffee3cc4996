"""Errors that name a rank name the right one when ranks differ in what they see: the
launcher on a second node, whose processes' error folders are numbered by local rank, and
``resume_from="auto"`` when a rank's checkpoint folder is not rank 0's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.common.torchrun import run_worker

pytestmark = pytest.mark.distributed


def test_second_node_names_the_global_rank_of_a_recorded_error(tmp_path: Path) -> None:
    # Node 1 of a 2-node run with 2 processes each holds global ranks 2 and 3; its agent
    # writes their errors to <attempt>/0/error.json and <attempt>/1/error.json. It reported
    # rank 2 (which lost its connection), and rank 3's recorded error is the cause.
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from scramjet.runtime.launch import _launch_error

    attempt = tmp_path / "run" / "attempt_0"
    for local, (when, message) in enumerate(
        [(20.0, "RuntimeError: Connection closed by peer"), (10.0, "ValueError: bad shard")]
    ):
        path = attempt / str(local) / "error.json"
        path.parent.mkdir(parents=True)
        extra = {"py_callstack": f"trace {local}", "timestamp": str(int(when))}
        record = {"message": message, "extraInfo": extra}
        path.write_text(json.dumps({"message": record}))
        os.utime(path, (when, when))
    reported = {
        2: ProcessFailure(
            local_rank=0, pid=100, exitcode=1, error_file=str(attempt / "0" / "error.json")
        )
    }
    error = _launch_error(ChildFailedError("train.py", reported))
    assert error.rank == 3, str(error)
    assert sorted(error.failures) == [2, 3], error.failures
    assert "bad shard" in error.message and "trace 1" in str(error)
    assert str(error).startswith("rank 3 failed: ValueError: bad shard"), str(error)


WORKER = """
import json, sys
from pathlib import Path
import torch
from torch import nn
from torch.utils.data import TensorDataset
from scramjet import Trainer
from scramjet.callbacks import SaveTrainingStateCallback
from scramjet.runtime import init_distributed
from scramjet.runtime import distributed as dist

out = Path(sys.argv[1])
init_distributed()
rank = dist.get_rank()
folder = str(out / f"ck_r{rank}")  # each rank names its own folder: rank 0's holds checkpoints
torch.manual_seed(0)
data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))

def trainer():
    model = nn.Linear(4, 2)
    return Trainer(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1),
                   callbacks=[SaveTrainingStateCallback(folder, every_n_steps=1)])

trainer().train(data, num_epochs=1, per_device_batch_size=4)
try:
    trainer().train(data, num_epochs=2, per_device_batch_size=4, resume_from="auto")
    message = None
except FileNotFoundError as error:
    message = str(error)
(out / f"rank{rank}.json").write_text(json.dumps({"message": message, "folder": folder}))
"""


def test_auto_resume_names_rank_zeros_folder_and_the_blind_ranks_own(tmp_path: Path) -> None:
    r0, r1 = run_worker(WORKER, tmp_path, timeout=120)
    for record in (r0, r1):
        message = record["message"]
        assert message is not None, record
        assert f"rank 0 found checkpoints in {r0['folder']!r}" in message, message
        assert f"rank 1 (in {r1['folder']!r}) cannot see them" in message, message


@pytest.mark.parametrize("rank", [0, 1])
def test_a_resume_on_another_world_size_is_said_once_by_rank_zero(
    rank: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every rank printed the same warning (twice with 2 ranks, 8 times with 8)
    import warnings

    from scramjet.checkpoint import resume
    from scramjet.runtime.seeding import get_rng_states

    monkeypatch.setattr(resume.dist, "get_rank", lambda: rank)
    monkeypatch.setattr(resume.dist, "get_world_size", lambda: 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resume._restore_rng([get_rng_states()])  # saved by 1 process, resumed by 2
    said = [w for w in caught if "saved by 1 process(es) and is resumed by 2" in str(w.message)]
    assert len(said) == (1 if rank == 0 else 0), [str(w.message) for w in caught]
