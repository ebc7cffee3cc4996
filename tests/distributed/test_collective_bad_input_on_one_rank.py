"""A bad input on one rank of a collective (gather, gather_object, broadcast_object,
reduce): every rank raises the same clear error at once, naming the rank, instead of that
rank failing while the others wait in the collective until the timeout (real two-process
gloo run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.common.torchrun import run_torchrun

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys, threading, time, torch
from pathlib import Path
from scramjet.runtime import (
    broadcast_object, destroy_distributed, gather, gather_object, get_rank, init_distributed,
    reduce,
)

init_distributed(timeout=30)
rank = get_rank()
seen = {}

def attempt(name, call):
    start = time.monotonic()
    try:
        seen[name] = {"result": repr(call())}
    except (TypeError, ValueError, RuntimeError) as error:
        seen[name] = {"error": f"{type(error).__name__}: {error}"}
    seen[name]["seconds"] = time.monotonic() - start
    Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))

bad = rank == 1
attempt("gather_non_tensor", lambda: gather([1, 2] if bad else torch.ones(2)))
attempt(
    "gather_pad_value",
    lambda: gather(torch.ones(1, 2, dtype=torch.long if bad else torch.float32), pad_value=0.5),
)
attempt("gather_object_unpicklable", lambda: gather_object(threading.Lock() if bad else {"a": 1}))
attempt("broadcast_unpicklable", lambda: broadcast_object(threading.Lock() if bad else 1, src=1))
attempt("reduce_non_number", lambda: reduce("text" if bad else torch.ones(2)))
attempt("reduce_op", lambda: reduce(torch.ones(2), "median" if bad else "sum"))
attempt("after", lambda: gather(torch.tensor([float(rank)])).tolist())
destroy_distributed()
"""

CASES = {
    "gather_non_tensor": ("TypeError", "expected a torch.Tensor, got list"),
    "gather_pad_value": ("ValueError", "pad_value=0.5 cannot be stored"),
    "gather_object_unpicklable": ("TypeError", "lock"),
    "broadcast_unpicklable": ("TypeError", "lock"),
    "reduce_non_number": ("TypeError", "expected a tensor or a number, got str"),
    "reduce_op": ("ValueError", "'median'"),
}


def test_every_rank_raises_at_once_when_one_rank_passes_a_bad_input(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    done = run_torchrun(script, str(tmp_path), timeout=120)
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for name, (kind, detail) in CASES.items():
        for rank, by_rank in enumerate(seen):
            case = by_rank.get(name, {"error": "never reached"})
            assert case.get("error", "").startswith(f"{kind}: "), (name, rank, case)
            assert "rank(s) 1" in case["error"] and detail in case["error"], (name, rank, case)
            assert case["seconds"] < 10, (name, rank, case)  # the timeout is 30 s
    assert [s["after"]["result"] for s in seen] == ["[0.0, 1.0]"] * 2  # the group still works
    assert done.returncode == 0, done.stderr[-3000:]
