"""reduce_async() takes "mean" and "sum" only: another op is an error in one process and on
every rank of a real two-process gloo run, never a silent sum."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.common.torchrun import run_worker

from scramjet.runtime.distributed import reduce_async

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys, torch
from pathlib import Path
from scramjet.runtime import destroy_distributed, get_rank, init_distributed
from scramjet.runtime.distributed import reduce_async

init_distributed(timeout=20)
rank = get_rank()
seen = {}
for op in ("max", "min", "avg"):
    try:
        seen[op] = reduce_async(torch.tensor([1.0 + rank]), op).result().tolist()
    except ValueError as error:
        seen[op] = "ValueError: " + str(error)
seen["mean"] = reduce_async(torch.tensor([1.0 + rank]), "mean").result().tolist()
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))
destroy_distributed()
"""


def test_an_op_other_than_mean_or_sum_is_refused_on_every_rank(tmp_path: Path) -> None:
    records = run_worker(WORKER, tmp_path, timeout=60)
    for rank in (0, 1):
        seen = records[rank]
        for op in ("max", "min", "avg"):  # "max" of [1, 2] came back as their sum, 3
            assert seen[op].startswith("ValueError: ") and repr(op) in seen[op], seen
        assert seen["mean"] == [1.5]


def test_an_op_other_than_mean_or_sum_is_refused_in_one_process() -> None:
    with pytest.raises(ValueError, match="'max'"):
        reduce_async(torch.ones(1), "max")  # type: ignore[arg-type]
