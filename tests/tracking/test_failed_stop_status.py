"""A run that ``train()`` ends by raising its stop's error (``TerminateOnNaNCallback``:
``TrainingNaNError``) is recorded ``failed`` with that error, gets no final checkpoint and
no ``model/``, and stays ``failed`` through a rerun that resumes the recorded stop and so
trains nothing. A plain ``stop_training()`` stop still ends ``finished``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.torchrun import run_torchrun
from tracking_helpers import tiny_data, tiny_model

from scramjet import Trainer
from scramjet.callbacks import (
    SaveTrainingStateCallback,
    TerminateOnNaNCallback,
    TrainerCallback,
    TrainingNaNError,
)
from scramjet.checkpoint import CheckpointManager
from scramjet.tracking import Experiment, list_runs

BATCHES = 4  # per epoch: 64 samples, 16 per batch
NAN_AT = 7  # the 7th batch (the 3rd of epoch 2): 6 updates made before the stop


class _LossWithNaN:
    """Cross-entropy, NaN at the ``at``-th call (None: never)."""

    def __init__(self, at: int | None) -> None:
        self.at, self.calls = at, 0

    def __call__(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        loss = torch.nn.functional.cross_entropy(outputs, targets)
        return loss * float("nan") if self.calls == self.at else loss


def _train(
    tmp_path: Path, callbacks: list[Any], nan_at: int | None, **train: Any
) -> tuple[Trainer, BaseException | None]:
    model = tiny_model()
    trainer = Trainer(
        model,
        _LossWithNaN(nan_at),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[TerminateOnNaNCallback(), *callbacks],
        seed=0,
    )
    try:
        trainer.train(tiny_data(64), num_epochs=3, per_device_batch_size=16, **train)
    except TrainingNaNError as error:
        return trainer, error
    return trainer, None


def _info(run: Path) -> dict[str, Any]:
    info: dict[str, Any] = json.loads((run / "run.json").read_text())
    return info


def _checkpoint_steps(run: Path) -> list[int]:
    manager = CheckpointManager(run / "checkpoints", keep_last=None)
    return sorted(c.step for c in manager.checkpoints())


def test_a_run_ended_by_a_nan_loss_is_failed_with_the_error(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path / "runs")
    trainer, error = _train(tmp_path, [exp], nan_at=NAN_AT)
    assert error is not None, "train() raises TrainingNaNError"
    info = _info(exp.run_dir)
    assert info["status"] == "failed"
    assert info["error"].startswith("TrainingNaNError: Training stopped: the loss is nan")
    assert info["last_step"] == NAN_AT - 1 == trainer.state.global_step
    assert "ended" in info and "duration" in info
    assert not (exp.run_dir / "model").exists(), "no final weights as if the run succeeded"
    assert _checkpoint_steps(exp.run_dir) == [BATCHES], "the epoch's checkpoint, no final one"
    assert "failed" in (exp.run_dir / "report.html").read_text()
    listed = list_runs(tmp_path / "runs", project="p")
    assert [r["status"] for r in listed] == ["failed"]


def test_results_logged_after_the_failed_run_keep_it_failed(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path / "runs")
    _train(tmp_path, [exp], nan_at=NAN_AT)
    exp.log_results("test", {"accuracy": 0.5})
    info = _info(exp.run_dir)
    assert info["status"] == "failed" and info["error"].startswith("TrainingNaNError")


def test_a_rerun_resumes_before_the_failure_and_meets_it_again(tmp_path: Path) -> None:
    # The failed stop is not recorded as stop_training(): a rerun with resume_from="auto"
    # used to load it, train nothing and return (exit 0: a requeued NaN job looked fine).
    saves = tmp_path / "states"
    exp = Experiment("p", "e", root=tmp_path / "runs")
    _, error = _train(tmp_path, [SaveTrainingStateCallback(saves), exp], nan_at=NAN_AT)
    assert error is not None
    assert _checkpoint_steps_in(saves) == [BATCHES], "no save of the failed stop"

    again = Experiment("p", "e", root=tmp_path / "runs")
    # the same data again: NaN at the 3rd batch after the resume point, as before
    rerun, error = _train(
        tmp_path, [SaveTrainingStateCallback(saves), again], nan_at=NAN_AT - BATCHES,
        resume_from="auto",
    )  # fmt: skip
    assert error is not None, "the rerun meets the failure again and raises"
    assert again.run_dir == exp.run_dir and rerun.state.global_step == NAN_AT - 1
    assert _info(again.run_dir)["status"] == "failed"

    fixed = Experiment("p", "e", root=tmp_path / "runs")
    rerun, error = _train(
        tmp_path, [SaveTrainingStateCallback(saves), fixed], nan_at=None, resume_from="auto"
    )
    assert error is None and rerun.state.global_step == 3 * BATCHES, "fixed: it trains on"
    assert _info(fixed.run_dir)["status"] == "finished"


def _checkpoint_steps_in(folder: Path) -> list[int]:
    return sorted(c.step for c in CheckpointManager(folder, keep_last=None).checkpoints())


def test_resuming_the_failed_run_from_its_last_checkpoint_trains_on_and_finishes(
    tmp_path: Path,
) -> None:
    exp = Experiment("p", "e", root=tmp_path / "runs")
    _train(tmp_path, [exp], nan_at=NAN_AT)

    again = Experiment("p", "e", root=tmp_path / "runs", resume="latest")
    rerun, error = _train(tmp_path, [again], nan_at=None)

    assert error is None and again.run_dir == exp.run_dir
    assert rerun.state.global_step == 3 * BATCHES, "resumed from epoch 1's checkpoint"
    info = _info(again.run_dir)
    assert info["status"] == "finished" and "error" not in info
    assert (again.run_dir / "model" / "model.pt").is_file()


class _StopAfterFirstEpoch(TrainerCallback):
    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        trainer.stop_training()


def test_a_stop_training_stop_still_finishes_with_its_weights(tmp_path: Path) -> None:
    exp = Experiment("p", "e", root=tmp_path / "runs")
    trainer, error = _train(tmp_path, [_StopAfterFirstEpoch(), exp], nan_at=None)
    assert error is None and trainer.state.global_step == BATCHES
    info = _info(exp.run_dir)
    assert info["status"] == "finished" and "error" not in info
    assert (exp.run_dir / "model" / "model.pt").is_file()


@pytest.mark.distributed
@pytest.mark.parametrize("mode", ["nan", "one-rank"])
def test_a_failed_stop_across_processes_is_failed_on_every_rank_alike(
    tmp_path: Path, mode: str
) -> None:
    """Every rank skips the final checkpoint and weights together (no rank waits in a
    collective the others left), also when one rank's callback raised the stop: the ranks
    vote on it and every one raises it."""
    job = Path(__file__).parent / "failed_stop_job.py"
    done = run_torchrun(job, mode, str(tmp_path), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    raised = [r["raised"] for r in ranks]
    # one rank's failure is voted on and raised by every rank (the other names the rank)
    assert raised == (["TrainingNaNError"] * 2 if mode == "nan" else ["StopTrainingError"] * 2)
    run = Path(ranks[0]["run_dir"])
    assert {r["run_dir"] for r in ranks} == {str(run)}
    info = _info(run)
    assert info["status"] == "failed", info
    expected = "TrainingNaNError" if mode == "nan" else "StopTrainingError: rank 1 stopped"
    assert info["error"].startswith(expected), info["error"]
    assert info["last_step"] == ranks[0]["step"] == ranks[1]["step"]
    assert not (run / "model").exists()
    assert _checkpoint_steps(run) == [], "no final checkpoint"
