"""An object that pickles on its rank but cannot be read on another (a class defined in
one rank's ``__main__`` only, a ``__reduce__`` whose loader raises) in ``gather_object`` /
``broadcast_object``: every rank raises the same clear error at once, naming the rank
whose object could not be read and why, instead of one rank raising while the others
return or wait in the next collective until the timeout (real two-process gloo run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.common.torchrun import run_torchrun

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys, time
from pathlib import Path
from scramjet.runtime import (
    broadcast_object, destroy_distributed, gather, gather_object, get_rank, init_distributed,
)
import torch

init_distributed(timeout=20)
rank = get_rank()
seen = {}

def refuse():
    raise RuntimeError("this object refuses to load")

class LoadsBadly:
    def __reduce__(self):
        return (refuse, ())

if rank == 1:
    class OnlyHere:  # rank 0's __main__ has no such class
        pass

def attempt(name, call):
    start = time.monotonic()
    try:
        seen[name] = {"result": repr(call())}
    except (TypeError, ValueError, RuntimeError, AttributeError) as error:
        seen[name] = {"error": f"{type(error).__name__}: {error}"}
    seen[name]["seconds"] = time.monotonic() - start
    Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))

attempt("gather_only_here", lambda: gather_object(OnlyHere() if rank == 1 else 0))
attempt("gather_loads_badly", lambda: gather_object(LoadsBadly() if rank == 1 else 0))
attempt("broadcast_only_here", lambda: broadcast_object(OnlyHere() if rank == 1 else 0, src=1))
attempt("broadcast_loads_badly", lambda: broadcast_object(LoadsBadly(), src=0))
attempt("gather_fine", lambda: gather_object({"rank": rank}))
attempt("after", lambda: gather(torch.tensor([float(rank)])).tolist())
destroy_distributed()
"""

CASES = {
    "gather_only_here": ("rank 1", "OnlyHere"),
    "gather_loads_badly": ("rank 1", "refuses to load"),
    "broadcast_only_here": ("rank 1", "OnlyHere"),
    "broadcast_loads_badly": ("rank 0", "refuses to load"),
}


def test_every_rank_raises_when_an_object_cannot_be_read_on_another_rank(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    done = run_torchrun(script, str(tmp_path), timeout=120)
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for name, (source, detail) in CASES.items():
        for rank, by_rank in enumerate(seen):
            case = by_rank.get(name, {"error": "never reached"})
            error = case.get("error", "")
            assert error.startswith("ValueError: "), (name, rank, case)
            assert f"{source}'s object" in error and detail in error, (name, rank, case)
            assert case["seconds"] < 8, (name, rank, case)  # the timeout is 20 s
    assert [s["gather_fine"]["result"] for s in seen] == ["[{'rank': 0}, {'rank': 1}]"] * 2
    assert [s["after"]["result"] for s in seen] == ["[0.0, 1.0]"] * 2  # the group still works
    assert done.returncode == 0, done.stderr[-3000:]
