"""BatchNorm running statistics are rank 0's on every rank after every update, with DDP
when an epoch ends inside an accumulation window, and with FSDP (which does not
synchronise buffers itself), windows complete or cut short (torchrun, 2 processes, gloo
on CPU): the buffers, ``predict`` and ``eval_loss_epoch`` of both ranks are those of the
checkpoint rank 0 writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bn_sync_job as job
import pytest
import torch
from tests.common.torchrun import run_torchrun
from torch import nn

from scramjet.checkpoint.manager import CheckpointManager

pytestmark = pytest.mark.distributed

JOB = str(Path(__file__).with_name("bn_sync_job.py"))
CASES = ("limit", "stream", "fsdp", "fsdp_limit")
UPDATES = {"limit": 2, "stream": 2, "fsdp": 4, "fsdp_limit": 2}  # 2: the second is cut short


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bn_sync")
    done = run_torchrun(JOB, str(folder), *CASES, timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    return folder


def saved_model(path: Path) -> nn.Module:
    model = job.make_model()
    CheckpointManager(path.parent).load({"model": model}, which=path)
    return model.eval()


@pytest.mark.parametrize("case", CASES)
def test_every_rank_holds_rank_0s_statistics_after_training(out: Path, case: str) -> None:
    ranks: list[dict[str, Any]] = [
        torch.load(out / case / f"rank{r}.pt", weights_only=False) for r in (0, 1)
    ]
    assert ranks[0]["steps"] == ranks[1]["steps"] == UPDATES[case]
    model = saved_model(out / case / "final.pt")
    for name, saved in model.named_buffers():
        for rank in ranks:
            assert torch.equal(rank["buffers"][name], saved), (case, name)
    x, y = job.tensors(12, 2)
    with torch.no_grad():
        expected = model(x)
    for rank in ranks:
        torch.testing.assert_close(rank["predictions"], expected, rtol=0, atol=1e-6)
        loss = nn.functional.cross_entropy(expected, y).item()
        assert rank["eval_loss"] == pytest.approx(loss, abs=1e-6)
