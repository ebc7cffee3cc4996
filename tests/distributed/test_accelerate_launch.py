"""`accelerate launch` runs examples/distributed_train.py unchanged: the Trainer takes the
process group from the environment accelerate's launcher sets (it hands off to
torch.distributed.run) and the precision from ``ACCELERATE_MIXED_PRECISION``."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from tests.distributed.test_example_script import (
    SCRIPT,
    check,
    free_port,
    run,
    summary,
    torchrun_cmd,
)

pytestmark = pytest.mark.distributed


def accelerate_cmd(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("accelerate")
    found = str(exe) if exe.exists() else shutil.which("accelerate")
    if found is None:
        raise RuntimeError(
            "the `accelerate` command is missing; it is a dev dependency: pip install -e '.[dev]'"
        )
    # --multi_gpu selects accelerate's torch.distributed.run launcher; with no GPU the
    # processes run on the CPU and the Trainer picks gloo.
    base = ["launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    return [found, *base, "--dynamo_backend", "no", "--main_process_port", str(free_port()), *args]


def test_accelerate_launch_matches_torchrun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no config file read or written
    torchrun_out, accelerate_out = tmp_path / "torchrun", tmp_path / "accelerate"
    two = ["--nproc-per-node", "2", "--master-port", str(free_port())]
    run(torchrun_cmd(*two, SCRIPT, "--out", str(torchrun_out)))
    done = run(accelerate_cmd("--mixed_precision", "no", SCRIPT, "--out", str(accelerate_out)))
    check(accelerate_out, 2)
    assert done.stdout.count("epoch 1 |") == 1  # rank 0 prints
    want, got = summary(torchrun_out), summary(accelerate_out)
    assert got["precision"] == "no"
    # Same seed, same global batch, same process count: the same run.
    assert got["eval_loss"] == pytest.approx(want["eval_loss"], rel=1e-6)


@pytest.mark.slow  # a second accelerate launch; the default run launches one
def test_accelerate_mixed_precision_flag_reaches_the_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    run(accelerate_cmd("--mixed_precision", "bf16", SCRIPT, "--out", str(tmp_path)))
    check(tmp_path, 2)
    assert summary(tmp_path)["precision"] == "bf16"
