"""Preemption: ``SIGTERM`` saves the training state at the next optimizer step and ends
``train()`` with ``TrainingPreempted`` (exit status 143); ``resume_from="auto"`` continues
and ends bitwise equal to an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import resume_job as job
import torch

from scramjet.callbacks import TrainerCallback
from scramjet.checkpoint import CheckpointManager
from scramjet.runtime.preemption import PREEMPTED_EXIT_CODE, PreemptionWatcher, TrainingPreempted

JOB = str(Path(__file__).resolve().parent.parent / "distributed" / "test_elastic.py")


class TermAt(TrainerCallback):
    """Sends SIGTERM to this process after one optimizer step (as a scheduler would)."""

    def __init__(self, step: int) -> None:
        self.at = step
        self.steps_after = 0

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        elif trainer.state.global_step > self.at:
            self.steps_after += 1


def weights(trainer: Any) -> list[dict[str, torch.Tensor]]:
    return [trainer.model.state_dict(), job.ema_weights(trainer)]


def test_sigterm_saves_stops_and_auto_resume_is_bitwise(tmp_path: Path) -> None:
    reference, kwargs = job.build(tmp_path / "ref", num_workers=0)
    reference.train(**kwargs)

    ckpt = tmp_path / "ckpt"
    before = signal.getsignal(signal.SIGTERM)
    term = TermAt(8)  # the save callback, which checkpoints in this event, runs after it
    trainer, kwargs = job.build(ckpt, num_workers=0, extra=(term,))
    with pytest.raises(TrainingPreempted) as stopped:
        trainer.train(**kwargs, resume_from="auto")
    assert stopped.value.code == PREEMPTED_EXIT_CODE == 143
    assert stopped.value.step == 8 and stopped.value.signal_name == "SIGTERM"
    assert term.steps_after == 0  # stopped at the first step boundary after the signal
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back
    newest = CheckpointManager(ckpt, keep_last=None).checkpoints()[-1]
    assert newest.step == 8 and stopped.value.checkpoint == str(newest.path)

    resumed, kwargs = job.build(ckpt, num_workers=0)
    resumed.train(**kwargs, resume_from="auto")
    assert resumed.state.global_step == job.TOTAL_STEPS
    for got, want in zip(weights(resumed), weights(reference), strict=True):
        for key in want:
            assert torch.equal(got[key], want[key]), key
    assert resumed.run_history.state_dict() == reference.run_history.state_dict()


def test_without_save_on_preemption_no_handler_is_installed(tmp_path: Path) -> None:
    from scramjet.callbacks import SaveTrainingStateCallback

    seen: list[object] = []

    class Look(TrainerCallback):
        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    off = SaveTrainingStateCallback(tmp_path / "a", save_on_preemption=False)
    trainer, kwargs = job.build(None, num_workers=0, extra=(off, Look()))
    trainer.train(**{**kwargs, "num_epochs": 1})
    assert seen and all(handler is before for handler in seen)
    on = SaveTrainingStateCallback(tmp_path / "b")
    trainer, kwargs = job.build(None, num_workers=0, extra=(on, Look()))
    seen.clear()
    trainer.train(**{**kwargs, "num_epochs": 1})
    assert seen and all(handler is not before for handler in seen)
    assert signal.getsignal(signal.SIGTERM) is before


def test_watcher_outside_the_main_thread_and_bad_signals() -> None:
    results: list[bool] = []
    watcher = PreemptionWatcher()
    thread = threading.Thread(target=lambda: results.append(watcher.install()))
    thread.start()
    thread.join()
    assert results == [False] and not watcher.installed
    with pytest.raises(TypeError, match="signal numbers"):
        PreemptionWatcher(signals=("SIGTERM",))  # type: ignore[arg-type]


@pytest.mark.slow  # ~15 s; tests/distributed/test_elastic.py checks status 143 by default
def test_a_preempted_process_exits_143_and_the_rerun_matches(tmp_path: Path) -> None:
    """A separate process (one rank): SIGTERM from outside, exit status 143, rerun."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    reference = tmp_path / "reference"
    subprocess.run(
        [sys.executable, JOB, str(reference), str(reference / "ckpt")], env=env, check=True
    )
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    child = subprocess.Popen(
        [sys.executable, JOB, str(out), str(ckpt), "--delay", "0.1"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "step0").exists() or int((out / "step0").read_text() or 0) < 3:
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    child.send_signal(signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 143, stderr[-3000:]
    assert "training stopped on SIGTERM" in stdout and "Traceback" not in stderr
    subprocess.run([sys.executable, JOB, str(out), str(ckpt)], env=env, check=True)
    got = torch.load(out / "rank0.pt", weights_only=False)
    want = torch.load(reference / "rank0.pt", weights_only=False)
    assert got["started_at"] >= 3
    for key in want["weights"]:
        assert torch.equal(got["weights"][key], want["weights"][key]), key
    assert got["history"] == want["history"]
