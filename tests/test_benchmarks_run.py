"""Every script in ``benchmarks/`` still runs, at a tiny size, and cleans up after itself.

The figures in docs/benchmarks.md come from these scripts, so a script that no longer
runs is a figure nobody can reproduce: one of them died at its last step after a
refactor (it read a display attribute that had moved), silently, because the live view it
measured had taken over standard error. Sizes here only check that each script gets to
its summary; the figures themselves come from the default sizes (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# (script, tiny arguments, a line of its summary); the quick ones run in the default suite.
QUICK = [
    ("checkpoint.py", ["--repeats", "1", "--hidden", "256", "--dir", "out"], "checksum"),
    ("dashboard_overhead.py", ["--reps", "1", "--steps", "20"], "components: per-step hook"),
    (
        "dashboard_overhead.py",
        ["--reps", "1", "--steps", "20", "--mode", "plain"],
        "dashboard mode: plain",
    ),
    ("data_gpu_decode.py", ["--n", "64", "--size", "64", "--rounds", "1"], ""),
    ("data_pack.py", ["--n", "64", "--rounds", "1"], "threads / processes"),
    ("data_read.py", ["--n", "64", "--size", "64", "--epochs", "1"], "JPEG ceiling:"),
    ("data_verify.py", ["--n", "64", "--size", "64", "--rounds", "1"], "verify=False"),
    ("trainer_overhead.py", ["--reps", "1", "--steps", "20", "--no-peers"], "scramjet Trainer"),
    (
        "trainer_pack.py",
        ["--images", "64", "--size", "32", "--epochs", "2", "--rounds", "1"],
        "the loop's DataLoader",
    ),
    ("accel_sparse.py", ["--samples", "256"], "sparse ms/step"),
    ("accel_data.py", ["--images", "64", "--epochs", "2", "--rounds", "1"], "CachedDataset"),
]
SLOW = [
    ("accel_compile.py", ["--steps", "3"], "COMPILE steps/s"),
    ("accel_extras.py", ["--quick"], "end: load average"),
    ("accel_seed.py", ["--images", "64", "--epochs", "2"], "vs plain"),
    (
        "data_stream.py",
        ["--images", "256", "--shards", "4", "--batch", "32", "--rounds", "1", "--no-peers"],
        "load average (1 min) after",
    ),
    ("tracking_overhead.py", ["--reps", "1", "--epochs", "1", "--steps", "20"], "per epoch"),
]


def _run(tmp_path: Path, script: str, args: list[str], summary: str) -> None:
    # A temp folder of the script's own, with a short path: DataLoader workers pass tensors
    # through a Unix socket under it, and Python before 3.13 hangs the loader when that
    # path is over 107 bytes (the test's own tmp_path, under pytest-xdist, is).
    temp = Path(tempfile.mkdtemp(prefix="sj-bench-"))
    try:
        _check_run(tmp_path, temp, script, args, summary)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _check_run(tmp_path: Path, temp: Path, script: str, args: list[str], summary: str) -> None:
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT / "benchmarks")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=300, start_new_session=True,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "Traceback" not in output and "not measured" not in output, output[-3000:]
    if script == "data_gpu_decode.py":
        import torch

        if not torch.cuda.is_available():
            summary = "skipped: torch sees no CUDA device here"
    assert summary in done.stdout, done.stdout[-3000:]
    # torch's compile cache is meant to outlive a run; anything else was left behind.
    left = [name for name in os.listdir(temp) if not name.startswith("torchinductor_")]
    assert left == [], left


@pytest.mark.parametrize(
    ("script", "args", "summary"),
    QUICK,
    ids=[s + ("-plain" if "plain" in a else "") for s, a, _ in QUICK],
)
def test_a_benchmark_runs_to_its_summary(
    tmp_path: Path, script: str, args: list[str], summary: str
) -> None:
    _run(tmp_path, script, args, summary)


@pytest.mark.slow
@pytest.mark.parametrize(("script", "args", "summary"), SLOW, ids=[s for s, _, _ in SLOW])
def test_a_longer_benchmark_runs_to_its_summary(
    tmp_path: Path, script: str, args: list[str], summary: str
) -> None:
    _run(tmp_path, script, args, summary)


def test_every_benchmark_script_is_run_here() -> None:
    scripts = {path.name for path in (ROOT / "benchmarks").glob("*.py")}
    covered = {script for script, _, _ in QUICK + SLOW} | {"accel_common.py"}  # a module
    assert scripts == covered, scripts ^ covered
