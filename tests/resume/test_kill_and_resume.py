"""A run killed with SIGKILL and resumed from its checkpoints ends bitwise equal to one
that was never interrupted (CPU, deterministic ops): weights, EMA weights and history."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import resume_job as job
import torch

JOB = str(Path(__file__).with_name("resume_job.py"))


def reference() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict]:
    trainer, kwargs = job.build(None, extra=(job.StepReporter(),))
    trainer.train(**kwargs)
    return trainer.model.state_dict(), job.ema_weights(trainer), trainer.run_history.state_dict()


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs"


def read_step(path: Path) -> int:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return 0


def kill_at_random_step(tmp_path: Path, kill_after: int) -> tuple[Path, int]:
    """Start the job in a process and SIGKILL it once it has passed ``kill_after`` steps."""
    ckpt, step_file = tmp_path / "ckpt", tmp_path / "step"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen(
        [sys.executable, JOB, str(ckpt), str(step_file), "0.05"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    try:
        while read_step(step_file) < kill_after:
            if child.poll() is not None:
                raise AssertionError(f"the job ended early: {child.stderr.read().decode()}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise AssertionError("the job did not reach the kill step within 60 s")
            time.sleep(0.005)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
        child.stderr.close()  # type: ignore[union-attr]
    assert child.returncode == -signal.SIGKILL
    return ckpt, read_step(step_file)


@pytest.mark.parametrize(
    "trial", [0, *(pytest.param(i, marks=pytest.mark.slow) for i in range(1, 6))]
)
def test_sigkill_at_a_random_step_then_resume_is_bitwise_equal(tmp_path: Path, trial: int) -> None:
    kill_after = random.Random().randint(4, job.TOTAL_STEPS - 3)
    ckpt, killed_at = kill_at_random_step(tmp_path, kill_after)
    assert killed_at < job.TOTAL_STEPS, "the run finished before it could be killed"
    saved = sorted(p.name for p in ckpt.glob("ckpt-*.pt"))
    # keep_last=2: the oldest file is removed only after the new one is durable, so a kill
    # between the two leaves one extra (never fewer than the last good one).
    assert 1 <= len(saved) <= 3, saved

    trainer, kwargs = job.build(ckpt, extra=(job.StepReporter(),))
    trainer.train(**kwargs, resume_from=ckpt)

    weights, ema, history = reference()
    info = f"killed after step {killed_at} (asked {kill_after}); checkpoints {saved}"
    assert trainer.state.global_step == job.TOTAL_STEPS, info
    assert len(list(ckpt.glob("ckpt-*.pt"))) == 2, "the resumed run's saves rotate again"
    assert_bitwise_equal(trainer.model.state_dict(), weights)
    assert_bitwise_equal(job.ema_weights(trainer), ema)
    assert trainer.run_history.state_dict() == history, info
    assert len(history["metrics"]["train_loss_epoch"]) == job.EPOCHS
