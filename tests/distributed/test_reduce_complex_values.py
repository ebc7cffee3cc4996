"""reduce() and reduce_async() of complex tensors: real two-process gloo runs, compared
with the same arithmetic done by torch in one process."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.common.torchrun import run_worker

from scramjet.runtime import reduce

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys, torch
from pathlib import Path
from scramjet.runtime import destroy_distributed, get_rank, init_distributed, reduce
from scramjet.runtime.distributed import reduce_async

init_distributed(timeout=20)
rank = get_rank()
value = torch.tensor([1 + 2j, 3 - 1j]) * (rank + 1)
seen = {}
for name, combine in (("reduce", reduce), ("async", lambda v, op: reduce_async(v, op).result())):
    for op in ("mean", "sum"):
        out = combine(value, op)
        seen[f"{name}_{op}"] = [str(out.dtype), [[z.real, z.imag] for z in out.tolist()]]
for op in ("max", "min"):
    try:
        seen[op] = str(reduce(value, op).tolist())
    except ValueError as error:
        seen[op] = "ValueError: " + str(error)
seen["after"] = reduce(torch.tensor([float(rank)]), "sum").tolist()  # the group still works
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))
destroy_distributed()
"""


def test_complex_mean_and_sum_keep_the_imaginary_part(tmp_path: Path) -> None:
    records = run_worker(WORKER, tmp_path, timeout=60)
    parts = [torch.tensor([1 + 2j, 3 - 1j]) * (rank + 1) for rank in (0, 1)]
    expected = {"sum": parts[0] + parts[1], "mean": (parts[0] + parts[1]) / 2}
    for rank in (0, 1):
        seen = records[rank]
        for name in ("reduce", "async"):
            for op, want in expected.items():
                dtype, pairs = seen[f"{name}_{op}"]
                assert dtype == str(want.dtype), (name, op, seen)
                assert pairs == [[z.real, z.imag] for z in want.tolist()], (name, op, seen)
        for op in ("max", "min"):
            assert seen[op].startswith("ValueError: ") and "complex" in seen[op], seen
        assert seen["after"] == [1.0]


def test_complex_mean_in_one_process_is_the_complex_value() -> None:
    value = torch.tensor([1 + 2j, 3 - 1j])
    assert torch.equal(reduce(value, "mean"), value)
    with pytest.raises(ValueError, match="complex"):
        reduce(value, "max")
