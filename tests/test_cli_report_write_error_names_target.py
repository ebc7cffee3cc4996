"""A page ``scramjet report`` cannot write is named as the user gave it, not as the hidden
temporary file the atomic write used."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from scramjet.cli import main


def _run_folder(root: Path, name: str, lr: float) -> Path:
    run = root / "proj" / name
    run.mkdir(parents=True)
    (run / "hyperparams.json").write_text(json.dumps({"hyperparams": {"lr": lr}}))
    (run / "run.json").write_text(json.dumps({"status": "finished"}))
    return run


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_unwritable_comparison_page_is_named_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _run_folder(tmp_path, "a", 0.1), _run_folder(tmp_path, "b", 0.01)
    out = "/proc/compare ü.html"  # passes the creatable check, refuses every new file
    assert main(["report", str(a), str(b), "-o", out]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and repr(out) in err and ".tmp" not in err
