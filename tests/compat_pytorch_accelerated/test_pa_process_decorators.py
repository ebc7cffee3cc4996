"""pytorch-accelerated's process decorators in real processes (torchrun, gloo), used as its
users do: at the top of a script, before any Trainer exists, to prepare files once."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from tests.common.torchrun import run_torchrun

_JOB = """
    import json, os, sys, time
    from pathlib import Path
    from scramjet.compat.pytorch_accelerated.utils import (
        local_process_zero_first, local_process_zero_only, world_process_zero_only,
    )

    root = Path(sys.argv[1])
    rank = int(os.environ["RANK"])

    @local_process_zero_first
    def download(path):
        if path.exists():
            return "found"
        time.sleep(0.5)  # a slow download
        path.write_text("data")
        return "made"

    @local_process_zero_only
    def write_vocab(path):
        time.sleep(0.5)
        path.write_text("vocab")

    @world_process_zero_only
    def write_split(path):
        time.sleep(0.5)
        path.write_text("split")

    got = download(root / "data.txt")
    write_vocab(root / "vocab.txt")
    vocab_there = (root / "vocab.txt").exists()
    write_split(root / "split.txt")
    split_there = (root / "split.txt").exists()
    print("RESULT " + json.dumps([rank, got, vocab_there, split_there]), flush=True)
"""


@pytest.mark.slow
@pytest.mark.distributed
def test_decorated_functions_finish_on_process_zero_before_the_others_go_on(
    tmp_path: Path,
) -> None:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(_JOB))
    proc = run_torchrun(script, str(tmp_path), nproc=2, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    results = sorted(json.loads(ln[len("RESULT ") :]) for ln in lines)
    # Rank 1 downloads after rank 0 finished, so it finds the file; and it reads what
    # process zero wrote only once process zero has written it.
    assert results == [[0, "made", True, True], [1, "found", True, True]]
