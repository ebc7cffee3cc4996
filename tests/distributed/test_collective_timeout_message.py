"""A collective that only some ranks call (``if rank == 0: gather(...)``) or a barrier
that another rank never reaches, or the result of a ``reduce_async`` the other rank never
started: the rank left waiting gets, at the timeout, an error
that names the collective and says what usually causes it, instead of gloo's bare
``Timed out waiting 3000ms for recv operation`` (real two-process gloo run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.common.torchrun import run_torchrun

pytestmark = [pytest.mark.distributed, pytest.mark.serial]

WORKER = """
import json, sys, time, torch
from pathlib import Path
from scramjet.runtime import barrier, gather, get_rank, init_distributed
from scramjet.runtime.distributed import reduce_async

init_distributed(timeout=3)
rank = get_rank()
seen = {}
calls = (
    ("reduce_async", lambda: reduce_async(torch.ones(2)).result()),
    ("gather", lambda: gather(torch.ones(2))),
    ("barrier", barrier),
)
for name, call in calls:
    start = time.monotonic()
    try:
        call() if rank == 0 else time.sleep(5)
        seen[name] = "returned"
    except RuntimeError as error:
        seen[name] = f"{time.monotonic() - start:.1f}s {error}"
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))
"""


def test_the_waiting_rank_learns_which_collective_timed_out_and_why(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    run_torchrun(script, str(tmp_path), timeout=60)
    seen = json.loads((tmp_path / "rank0.json").read_text())
    for name in ("reduce_async", "gather", "barrier"):
        assert f"{name}: rank 0 waited" in seen[name], seen
        assert "every rank" in seen[name] and "same order" in seen[name], seen
    assert "Timed out" in seen["reduce_async"], seen  # torch's own message is kept
