"""broadcast_object() with a source rank outside the group: the same ValueError in one
process and on every rank of a real two-process gloo run."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.common.torchrun import run_worker

from scramjet.runtime import broadcast_object

pytestmark = pytest.mark.distributed

WORKER = """
import json, sys
from pathlib import Path
from scramjet.runtime import broadcast_object, destroy_distributed, get_rank, init_distributed

init_distributed(timeout=20)
rank = get_rank()
seen = {}
for src in (2, -1):
    try:
        seen[str(src)] = broadcast_object(f"from {rank}", src=src)
    except ValueError as error:
        seen[str(src)] = "ValueError: " + str(error)
seen["src1"] = broadcast_object(f"from {rank}", src=1)  # the group still works
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(seen))
destroy_distributed()
"""


def test_a_source_rank_outside_the_group_is_a_clear_error_on_every_rank(tmp_path: Path) -> None:
    records = run_worker(WORKER, tmp_path, timeout=60)
    for rank in (0, 1):
        seen = records[rank]
        for src in ("2", "-1"):
            assert seen[src].startswith("ValueError: "), seen
            assert f"src={src}" in seen[src] and "0 to 1" in seen[src], seen
        assert seen["src1"] == "from 1"


def test_a_source_rank_outside_one_process_is_the_same_error() -> None:
    # in one process the value came back unchanged, so the mistake showed only on 2 ranks
    with pytest.raises(ValueError, match="src=1"):
        broadcast_object("x", src=1)
    assert broadcast_object("x", src=0) == "x"
