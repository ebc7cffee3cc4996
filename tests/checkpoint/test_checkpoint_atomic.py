"""A process SIGKILLed at random moments while saving never leaves a bad latest checkpoint.

Both write modes: background writes (the default; the kill often lands while the writer
thread is inside a write) and writes inside ``save()``.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager

ROWS = 1 << 20  # 4 MiB of float32 per tensor, so a kill often lands inside a write


def save_forever(directory: str, first_step: int, async_write: bool) -> None:
    """Child process: save checkpoints whose contents all encode their own step."""
    torch.set_num_threads(1)
    manager = CheckpointManager(
        directory, keep_last=2, keep_best=1, monitor="loss", async_write=async_write
    )
    step = first_step
    while True:
        value = float(step)
        state = {
            "weights": torch.full((ROWS,), value),
            "bias": torch.full((ROWS // 4,), -value),
            "step_copy": step,
        }
        manager.save(state, step=step, metrics={"loss": 1.0 / (1 + step % 7)})
        step += 1


def check_latest(directory: Path) -> int:
    """Load the latest checkpoint with a fresh manager; check it is internally consistent."""
    manager = CheckpointManager(directory, keep_last=2, keep_best=1, monitor="loss")
    result = manager.load(fallback=False)  # a corrupt latest must not exist at all
    step = result.step
    assert result.values["step_copy"] == step
    assert torch.equal(result.values["weights"], torch.full((ROWS,), float(step)))
    assert torch.equal(result.values["bias"], torch.full((ROWS // 4,), -float(step)))
    return step


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork() to start savers quickly")
@pytest.mark.parametrize("async_write", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_sigkill_during_save_never_corrupts_latest(tmp_path: Path, async_write: bool) -> None:
    rng = random.Random(1234)
    # fork: the child starts instantly with torch already imported, so one test can
    # afford many kills; the kill itself is a real SIGKILL of a separate process.
    ctx = multiprocessing.get_context("fork")
    next_step, kills, interrupted_writes, last_step = 0, 0, 0, -1
    deadline = time.monotonic() + 25
    while kills < 25 and time.monotonic() < deadline:
        child = ctx.Process(
            target=save_forever, args=(str(tmp_path), next_step, async_write), daemon=True
        )
        child.start()
        time.sleep(rng.uniform(0.05, 0.4))
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join()
        assert child.exitcode == -signal.SIGKILL
        kills += 1
        if any(p.name.startswith(".tmp-") for p in tmp_path.iterdir()):
            interrupted_writes += 1  # the kill landed inside a write
        if not any(p.name.startswith("ckpt-") for p in tmp_path.iterdir()):
            continue  # killed before the first save finished: nothing to check yet
        step = check_latest(tmp_path)
        assert step >= last_step  # a restart never loses the progress already saved
        last_step, next_step = step, step + 1
    assert kills >= 10
    # A kill between a checkpoint's rename and its rotation leaves extra files behind;
    # the next complete save rotates them away: keep_last=2 + keep_best=1.
    manager = CheckpointManager(tmp_path, keep_last=2, keep_best=1, monitor="loss")
    manager.save({"step_copy": last_step + 1}, step=last_step + 1, metrics={"loss": 2.0})
    assert len(manager.checkpoints()) <= 3  # checkpoints() waits for the write in flight
    assert interrupted_writes >= 1, "no kill landed inside a write; the test proved nothing"
    assert last_step > 0
