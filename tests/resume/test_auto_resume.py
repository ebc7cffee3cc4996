"""``resume_from="auto"``: the newest good checkpoint of the run's folder, or a fresh start.

A run that crashes is continued by the same call with ``resume_from="auto"`` and ends
bitwise equal to an uninterrupted run (weights, EMA weights, history), also when the
newest checkpoint is damaged (it is skipped with a warning for the previous one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import resume_job as job
import torch

from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint import CheckpointManager

pytestmark = pytest.mark.filterwarnings("ignore:.*worker.*:UserWarning")


class StartedAt(TrainerCallback):
    """Records the optimizer step training started from (0, or the restored one)."""

    step = -1

    def on_training_run_start(self, trainer: Any, **kwargs: Any) -> None:
        self.step = trainer.state.global_step


class CrashAt(TrainerCallback):
    """A crash (an exception out of ``train()``) after one optimizer step."""

    def __init__(self, step: int) -> None:
        self.at = step

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.at:
            raise RuntimeError("crashed on purpose")


def run(ckpt: Path, *extra: TrainerCallback, resume_from: str | None = "auto") -> Any:
    trainer, kwargs = job.build(ckpt, num_workers=0, extra=extra)
    trainer.train(**kwargs, resume_from=resume_from)
    return trainer


def outcome(trainer: Any) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict]:
    return trainer.model.state_dict(), job.ema_weights(trainer), trainer.run_history.state_dict()


def assert_same(a: tuple, b: tuple) -> None:
    for left, right in zip(a[:2], b[:2], strict=True):
        assert left.keys() == right.keys()
        for key in left:
            assert torch.equal(left[key], right[key]), f"{key} differs"
    assert a[2] == b[2]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    return outcome(run(tmp_path_factory.mktemp("ref") / "ckpt", resume_from=None))


def test_auto_without_checkpoints_starts_fresh_and_says_so(
    tmp_path: Path, uninterrupted: tuple, capsys: pytest.CaptureFixture[str]
) -> None:
    started = StartedAt()
    trainer = run(tmp_path / "ckpt", started)
    lines = [line for line in capsys.readouterr().out.splitlines() if "resume_from='auto'" in line]
    assert lines == [f"resume_from='auto': no checkpoint in {tmp_path / 'ckpt'}; starting fresh"]
    assert started.step == 0
    assert_same(outcome(trainer), uninterrupted)


def test_auto_after_a_crash_skips_a_damaged_newest_checkpoint(
    tmp_path: Path, uninterrupted: tuple, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = tmp_path / "ckpt"
    with pytest.raises(RuntimeError, match="crashed on purpose"):
        run(ckpt, CrashAt(11))  # checkpoints every 3 steps and at epoch ends; keep_last=2
    found = CheckpointManager(ckpt, keep_last=None).checkpoints()
    newest, previous = found[-1], found[-2]
    data = bytearray(newest.path.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit in the newest file
    newest.path.write_bytes(bytes(data))

    started = StartedAt()
    with pytest.warns(UserWarning, match="trying the previous checkpoint"):
        trainer = run(ckpt, started)
    assert "resuming from the newest good checkpoint" in capsys.readouterr().out
    assert started.step == previous.step < newest.step <= 11
    assert_same(outcome(trainer), uninterrupted)


def test_auto_after_a_crash_resumes_bitwise(tmp_path: Path, uninterrupted: tuple) -> None:
    ckpt = tmp_path / "ckpt"
    with pytest.raises(RuntimeError):
        run(ckpt, CrashAt(17))
    newest = CheckpointManager(ckpt, keep_last=None).checkpoints()[-1].step
    started = StartedAt()
    trainer = run(ckpt, started)
    assert started.step == newest == 15  # saved every 3 steps
    assert_same(outcome(trainer), uninterrupted)


def test_auto_needs_a_checkpoint_callback(tiny_model: torch.nn.Module, blobs_data: Any) -> None:
    from scramjet import Trainer

    optimizer = torch.optim.SGD(tiny_model.parameters(), lr=0.1)
    trainer = Trainer(tiny_model, torch.nn.CrossEntropyLoss(), optimizer)
    with pytest.raises(ValueError, match="SaveTrainingStateCallback"):
        trainer.train(blobs_data, num_epochs=1, resume_from="auto")


def test_checkpoint_location_of_the_callback(tmp_path: Path) -> None:
    local = SaveTrainingStateCallback(tmp_path / "c")
    assert local.checkpoint_location == str(tmp_path / "c")
    remote = SaveTrainingStateCallback("s3://bucket/run/ckpt/", local_dir=tmp_path / "copies")
    assert remote.checkpoint_location == "s3://bucket/run/ckpt"
    assert remote.local_directory == tmp_path / "copies"


def test_experiment_resume_auto_continues_the_newest_run(
    tmp_path: Path, uninterrupted: tuple
) -> None:
    from scramjet.tracking import Experiment

    def experiment() -> Experiment:
        return Experiment("p", "e", root=tmp_path, resume="auto", checkpoint=3, save_script=False)

    first = experiment()  # no run yet: a new one
    with pytest.raises(RuntimeError):
        run_with(first, CrashAt(11))
    started = StartedAt()
    second = experiment()
    trainer = run_with(second, started)
    assert second.run_dir == first.run_dir  # the same run folder, continued
    assert started.step == 9
    assert_same(outcome(trainer), uninterrupted)


def run_with(experiment: Any, *extra: TrainerCallback) -> Any:
    trainer, kwargs = job.build(None, num_workers=0, extra=(experiment, *extra))
    trainer.train(**kwargs)
    return trainer
