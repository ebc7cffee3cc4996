"""gather(pad_value=...) with a value the tensors' integer dtype cannot hold: a ValueError on
every rank before any collective (real two-process gloo run), not one rank failing while
the other waits out the timeout."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.common.torchrun import run_worker

from scramjet.runtime import gather

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys, torch
from pathlib import Path
from scramjet.runtime import destroy_distributed, gather, get_rank, init_distributed

init_distributed(timeout=20)
rank = get_rank()
seen = {}
for name, pad in (("nan", float("nan")), ("half", 0.5), ("huge", 2.0**70)):
    try:
        seen[name] = gather(torch.ones(1, 2 + rank, dtype=torch.long), pad_value=pad).tolist()
    except ValueError as error:
        seen[name] = "ValueError: " + str(error)
seen["ok"] = gather(torch.ones(1, 2 + rank, dtype=torch.long), pad_value=-1).tolist()
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))
destroy_distributed()
"""


def test_a_pad_value_the_dtype_cannot_hold_is_an_error_on_every_rank(tmp_path: Path) -> None:
    records = run_worker(WORKER, tmp_path, timeout=60)
    for rank in (0, 1):
        seen = records[rank]
        for name in ("nan", "half", "huge"):
            assert seen[name].startswith("ValueError: ") and "torch.int64" in seen[name], seen
        assert seen["ok"] == [[1, 1, -1], [1, 1, 1]]


def test_the_same_error_in_one_process() -> None:
    with pytest.raises(ValueError, match="pad_value=nan"):
        gather(torch.ones(2, dtype=torch.int32), pad_value=float("nan"))
    assert gather(torch.ones(2, dtype=torch.int32), pad_value=-1).tolist() == [1, 1]
