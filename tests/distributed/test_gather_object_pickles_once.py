"""``gather_object`` / ``broadcast_object`` pickle each rank's object once per call (a
check that it pickles, then the pickling that sends it, would run a costly or
side-effecting ``__reduce__`` / ``__getstate__`` twice). Counted on each rank of a real
two-process gloo run, for an object defining either hook."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.common.torchrun import run_worker

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys
from pathlib import Path
from scramjet.runtime import (
    broadcast_object, destroy_distributed, gather_object, get_rank, init_distributed,
)

init_distributed(timeout=20)
rank = get_rank()
calls = {"reduce": 0, "getstate": 0}

def rebuild(tag):
    return ByReduce(tag)

class ByReduce:
    def __init__(self, tag):
        self.tag = tag
    def __reduce__(self):
        calls["reduce"] += 1
        return (rebuild, (self.tag,))

class ByState:
    def __init__(self, tag):
        self.tag = tag
    def __getstate__(self):
        calls["getstate"] += 1
        return {"tag": self.tag}

seen = {}
for name, call in (
    ("gather", lambda: [o.tag for o in gather_object(ByReduce(rank))]),
    ("gather_state", lambda: [o.tag for o in gather_object(ByState(rank))]),
    ("broadcast", lambda: broadcast_object(ByReduce(rank), src=1).tag),
):
    calls.update(reduce=0, getstate=0)
    seen[name] = {"result": call(), **calls}
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))
destroy_distributed()
"""


def test_each_rank_pickles_its_object_once_per_call(tmp_path: Path) -> None:
    records = run_worker(WORKER, tmp_path, timeout=120)
    for rank in (0, 1):
        seen = records[rank]
        assert seen["gather"] == {"result": [0, 1], "reduce": 1, "getstate": 0}, (rank, seen)
        assert seen["gather_state"] == {"result": [0, 1], "reduce": 0, "getstate": 1}, seen
        # only the source's object is sent, so only the source pickles
        sent = 1 if rank == 1 else 0
        assert seen["broadcast"] == {"result": 1, "reduce": sent, "getstate": 0}, (rank, seen)
