"""Does a run survive failures? Resumes with a changed dataset, two runs
writing into one checkpoint folder, a folder that cannot be written, a checkpoint already
at or past the end of a shorter run.

The jobs are ``resume_job.py``'s (AdamW, warmup-cosine, accumulation 2, EMA, dropout,
seed 7: 7 updates per epoch over 50 samples).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint import CheckpointManager
from scramjet.runtime.preemption import TrainingPreempted

sys.path.insert(0, str(Path(__file__).resolve().parent))
import resume_job as job


class CrashAt(TrainerCallback):
    """Raises after optimizer step ``step`` (before the checkpoint callback saves it)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            raise RuntimeError(f"crash at step {self.step}")


def crashed_run(folder: Path, step: int) -> None:
    """The job, with a checkpoint every 3 updates, crashed after update ``step``."""
    trainer, kwargs = job.build(folder, num_workers=0, extra=(CrashAt(step),))
    with pytest.raises(RuntimeError, match="crash at step"):
        trainer.train(**kwargs)


def resume_with(folder: Path, samples: int) -> tuple[list[str], job.CountingData]:
    """Resume the job from ``folder`` on a dataset of ``samples`` samples; the texts of
    the warnings it gave, and the dataset (what it was asked for)."""
    trainer, kwargs = job.build(folder, num_workers=0)
    data = job.CountingData(samples, seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(**{**kwargs, "train_dataset": data}, resume_from=folder)
    return [str(w.message) for w in caught], data


# ------------------------------------------------------------- another dataset length


def test_a_mid_epoch_resume_on_a_dataset_of_another_length_says_what_it_costs(
    tmp_path: Path,
) -> None:
    crashed_run(tmp_path / "ckpt", step=10)  # saved at update 9: 4 batches into epoch 2
    texts, data = resume_with(tmp_path / "ckpt", samples=job.NUM_SAMPLES - 1)
    # Before: silent. The rest of epoch 2 came from a new order of 49 samples with the
    # first 16 positions skipped, so samples the crashed run had trained were trained
    # again and others never (the scheduler's plan was the same: no warning at all).
    said = [t for t in texts if "training dataset of 49 samples" in t]
    assert len(said) == 1, texts
    assert "held 50" in said[0] and "epoch 2" in said[0]
    assert "pass the dataset the run was saved with" in said[0]
    assert data.fetched  # the run went on


def test_the_same_dataset_or_an_epoch_boundary_resume_says_nothing_about_it(
    tmp_path: Path,
) -> None:
    crashed_run(tmp_path / "mid", step=10)
    texts, _ = resume_with(tmp_path / "mid", samples=job.NUM_SAMPLES)
    assert not [t for t in texts if "training dataset of" in t]
    crashed_run(tmp_path / "boundary", step=8)  # the epoch-end checkpoint, update 7
    manager = CheckpointManager(tmp_path / "boundary")
    assert manager.load().step == 7
    texts, _ = resume_with(tmp_path / "boundary", samples=job.NUM_SAMPLES + 6)
    assert not [t for t in texts if "training dataset of" in t]


# ------------------------------------------------------------ two writers, one folder

_HOLD_OPEN = """
import os, sys, time
folder = sys.argv[1]
name = os.path.join(folder, f".tmp-ckpt-000009-step9.pt.{os.getpid()}.abcd1234")
with open(name, "wb") as file:
    file.write(b"half a checkpoint")
    file.flush()
    print(name, flush=True)
    sys.stdin.readline()  # writing until told to stop
os.remove(name)
"""


def test_a_temporary_file_another_live_process_is_writing_is_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    manager = CheckpointManager(folder, async_write=False)
    manager.save({"v": 1}, step=1)
    writer = subprocess.Popen(
        [sys.executable, "-c", _HOLD_OPEN, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        temporary = Path(writer.stdout.readline().strip())  # type: ignore[union-attr]
        assert temporary.exists()
        with pytest.warns(RuntimeWarning, match=rf"Another process \(pid {writer.pid}\)"):
            manager.save({"v": 2}, step=2)
        # Before: save() deleted it, and the other run's os.replace then failed with
        # FileNotFoundError, reported as "Fix the cause (disk space, permissions)".
        assert temporary.exists()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once per manager
            manager.save({"v": 3}, step=3)
    finally:
        writer.communicate("stop\n", timeout=10)
    assert writer.returncode == 0  # its own removal found the file
    left = folder / f".tmp-ckpt-000010-step10.pt.{writer.pid}.abcd1234"
    left.write_bytes(b"left by a process that has ended")
    manager.save({"v": 4}, step=4)
    assert not left.exists()  # a leftover is still removed
    assert [info.step for info in manager.checkpoints()][-1] == 4


# ------------------------------------------------------------ a folder it cannot write


def test_a_checkpoint_folder_that_cannot_be_written_stops_the_run_before_its_first_step(
    tmp_path: Path,
) -> None:
    (tmp_path / "runs").write_text("a file where the run's folder should be")
    folder = tmp_path / "runs" / "checkpoints"
    trainer, kwargs = job.build(folder, num_workers=0, every_n_steps=None)
    # Before: the whole first epoch trained, then its save failed and the epoch was lost.
    with pytest.raises(Exception, match="cannot write into") as caught:
        trainer.train(**kwargs)
    assert trainer.state.global_step == 0
    message = str(caught.value)
    assert str(folder) in message and "NotADirectoryError" in message
    assert "Pass a folder this process can write" in message


# ------------------------------------------------- a checkpoint past a shorter run's end


def test_a_mid_epoch_checkpoint_past_a_shorter_runs_end_is_said(tmp_path: Path) -> None:
    crashed_run(tmp_path / "ckpt", step=10)  # saved at update 9: 4 batches into epoch 2
    trainer, kwargs = job.build(tmp_path / "ckpt", num_workers=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train(**{**kwargs, "num_epochs": 1}, resume_from=tmp_path / "ckpt")
    assert trainer.state.global_step == 9  # nothing was trained
    assert [w for w in caught if "nothing is left to train" in str(w.message)]


# ------------------------------------------------- two checkpoint callbacks, one Trainer


class SigtermAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def two_savers(tmp_path: Path, *extra: TrainerCallback) -> tuple[Any, dict[str, Any]]:
    """The job saving every 3 updates into one folder and every epoch into another."""
    epochs = SaveTrainingStateCallback(tmp_path / "epochs", every_n_epochs=1, keep_last=1)
    return job.build(tmp_path / "steps", num_workers=0, extra=(epochs, *extra))


def test_two_checkpoint_callbacks_give_back_the_sigterm_handler_found_before(
    tmp_path: Path,
) -> None:
    def mine(signum: int, frame: Any) -> None:
        pass

    before = signal.signal(signal.SIGTERM, mine)
    try:
        trainer, kwargs = two_savers(tmp_path)
        trainer.train(**kwargs)
        # Before: the second callback put back the first one's handler, which only records
        # the signal, so after train() returned SIGTERM no longer ended the process.
        assert signal.getsignal(signal.SIGTERM) is mine
        trainer, kwargs = two_savers(tmp_path / "preempted", SigtermAt(4))
        with pytest.raises(TrainingPreempted):
            trainer.train(**kwargs)
        assert signal.getsignal(signal.SIGTERM) is mine
        # Before: only the handler installed last (the second callback's) saw the signal,
        # so the preemption checkpoint went to its folder, and resume_from="auto" (the
        # first callback's folder) went back to update 3.
        assert CheckpointManager(tmp_path / "preempted" / "steps").load().step == 4
        trainer, kwargs = two_savers(tmp_path / "preempted")
        trainer.train(**kwargs, resume_from="auto")
        assert signal.getsignal(signal.SIGTERM) is mine
        reference, kwargs = job.build(None, num_workers=0)
        reference.train(**kwargs)
        for key, value in reference.unwrapped_model.state_dict().items():
            assert torch.equal(trainer.unwrapped_model.state_dict()[key], value), key
    finally:
        signal.signal(signal.SIGTERM, before)
