"""reduce() given different inputs on different ranks, and bool sums: real two-process runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys, torch
from pathlib import Path
from scramjet.runtime import destroy_distributed, get_rank, init_distributed, reduce
from scramjet.runtime.distributed import reduce_async

init_distributed(timeout=20)
rank = get_rank()
seen = {}

def attempt(name, value, op="sum", combine=reduce):
    try:
        seen[name] = combine(value, op).tolist()
    except ValueError as error:
        seen[name] = "ValueError: " + str(error)
    except RuntimeError as error:  # gloo's own errors
        seen[name] = "RuntimeError: " + str(error)

def in_background(value, op):
    return reduce_async(value, op).result()

attempt("length", torch.ones(3 if rank == 0 else 2))
attempt("dtype", torch.ones(2, dtype=torch.float32 if rank == 0 else torch.float64), "max")
attempt("layout", torch.ones((2, 3) if rank == 0 else (3, 2)), "mean")
attempt("scalar_kind", 1 if rank == 0 else 1.5)
flags = torch.tensor([True, False, True]) if rank == 0 else torch.tensor([True, True, False])
attempt("bool_sum", flags)
attempt("bool_sum_scalar", rank == 0 or rank == 1)
attempt("bool_max", flags, "max")
attempt("bool_min", flags, "min")
attempt("bool_mean", flags, "mean")
nan = float("nan")
with_nans = torch.tensor([nan, 1.0, 2.0]) if rank == 0 else torch.tensor([1.0, nan, 3.0])
attempt("nan_max", with_nans, "max")
attempt("nan_min", with_nans, "min")
attempt("async_int_mean", torch.tensor([1, 2 + rank]), "mean", in_background)
attempt("async_bool_sum", flags, "sum", in_background)
seen["after"] = reduce(torch.tensor([float(rank)]), "sum").tolist()  # the group still works
seen["unchecked"] = reduce(torch.tensor([1.0, 2.0 + rank]), "sum", check=False).tolist()
seen["unchecked_nan"] = reduce(with_nans, "max", check=False).tolist()
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))
destroy_distributed()
"""


@pytest.fixture(scope="module")
def seen_by_rank(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """What each of two gloo ranks saw running WORKER once."""
    tmp_path = tmp_path_factory.mktemp("reduce")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = subprocess.run(
        [*cmd, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_reduce_of_different_shapes_or_dtypes_is_a_clear_error_on_every_rank(
    seen_by_rank: list[dict[str, Any]],
) -> None:
    for seen in seen_by_rank:
        for case in ("length", "dtype", "layout", "scalar_kind"):
            assert seen[case].startswith("ValueError: reduce:"), (case, seen[case])
        assert (
            "float32 [3] on rank 0" in seen["length"] and "float32 [2] on rank 1" in seen["length"]
        )
        assert "torch.float32" in seen["dtype"] and "torch.float64" in seen["dtype"]
        assert (
            "float32 [2, 3] on rank 0" in seen["layout"]
            and "float32 [3, 2] on rank 1" in seen["layout"]
        )
        assert "torch.int64" in seen["scalar_kind"] and "torch.float32" in seen["scalar_kind"]
        assert seen["after"] == [1.0]


def test_reduce_sum_of_bools_counts_the_true_values(seen_by_rank: list[dict[str, Any]]) -> None:
    for seen in seen_by_rank:
        assert seen["bool_sum"] == [2, 1, 1]  # gloo alone gives a logical OR: [True]*3
        assert seen["bool_sum_scalar"] == 2
        assert seen["bool_max"] == [True, True, True]  # any
        assert seen["bool_min"] == [True, False, False]  # all
        assert seen["bool_mean"] == [1.0, 0.5, 0.5]
        assert seen["after"] == [1.0]


def test_reduce_async_of_ints_and_bools_gives_what_reduce_gives(
    seen_by_rank: list[dict[str, Any]],
) -> None:
    for seen in seen_by_rank:
        assert seen["async_int_mean"] == [1.0, 2.5]  # was a RuntimeError casting to Long
        assert seen["async_bool_sum"] == [2, 1, 1]


def test_reduce_max_and_min_keep_a_nan_from_any_rank_as_torch_does(
    seen_by_rank: list[dict[str, Any]],
) -> None:
    nan = float("nan")
    parts = torch.tensor([[nan, 1.0, 2.0], [1.0, nan, 3.0]])
    for seen in seen_by_rank:
        for op, reference in (("max", parts.amax(dim=0)), ("min", parts.amin(dim=0))):
            got = torch.tensor(seen[f"nan_{op}"])
            assert torch.equal(got.isnan(), reference.isnan()), (op, got)  # gloo: [nan, 1, ..]
            assert torch.equal(got.nan_to_num(), reference.nan_to_num()), (op, got)


def test_reduce_without_the_check_gives_the_same_values(
    seen_by_rank: list[dict[str, Any]],
) -> None:
    for seen in seen_by_rank:
        assert seen["unchecked"] == [2.0, 5.0]
        assert str(seen["unchecked_nan"]) == str(seen["nan_max"])
