"""Resume at an epoch boundary, from a single file, from a stream, with fp16, and without
replaying skipped batches; saving inside an accumulation window warns."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import resume_job as job
import torch

from scramjet import Trainer
from scramjet.callbacks import CallbackError, SaveTrainingStateCallback, TrainerCallback


class Crash(TrainerCallback):
    """Optionally saves a single-file checkpoint, then fails, at a given optimizer step."""

    def __init__(self, at_step: int | None = None, save_to: Path | None = None) -> None:
        self.at_step = at_step
        self.save_to = save_to

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step != self.at_step:
            return
        if self.save_to is not None:
            trainer.save_checkpoint(self.save_to, checkpoint_kwargs={"note": "mid-epoch"})
        raise RuntimeError("simulated crash")


def finished(trainer: Trainer) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict]:
    return trainer.model.state_dict(), job.ema_weights(trainer), trainer.run_history.state_dict()


@pytest.fixture(scope="module")
def uninterrupted() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict]:
    trainer, kwargs = job.build(None, num_workers=0, extra=(Crash(),))
    trainer.train(**kwargs)
    return finished(trainer)


def assert_same_run(trainer: Trainer, expected: tuple[dict, dict, dict]) -> None:
    weights, ema, history = finished(trainer)
    for got, want in ((weights, expected[0]), (ema, expected[1])):
        assert got.keys() == want.keys()
        for key in got:
            assert torch.equal(got[key], want[key]), f"{key} differs"
    assert history == expected[2]
    assert trainer.state.global_step == job.TOTAL_STEPS


def crash_then_resume(
    tmp_path: Path,
    at_step: int,
    *,
    every_n_steps: int | None,
    single_file: bool = False,
    precision: str = "no",
) -> tuple[Trainer, Path, list[str]]:
    """Train until a crash at ``at_step``, resume in a new Trainer; also the saved names."""
    ckpt = tmp_path / "ckpt"
    target = tmp_path / "state.pt" if single_file else None
    crashed, kwargs = job.build(
        ckpt,
        every_n_steps=every_n_steps,
        num_workers=0,
        extra=(Crash(at_step, target),),
        precision=precision,
    )
    with pytest.raises(CallbackError, match="simulated crash"):
        crashed.train(**kwargs)
    saved = sorted(p.name for p in ckpt.glob("ckpt-*.pt"))
    resumed, kwargs = job.build(
        ckpt, every_n_steps=every_n_steps, num_workers=0, extra=(Crash(),), precision=precision
    )
    source = target if target is not None else ckpt
    assert source is not None
    resumed.train(**kwargs, resume_from=source)
    return resumed, source, saved


def test_resume_at_an_epoch_boundary(tmp_path: Path, uninterrupted: Any) -> None:
    # Checkpoints only at epoch ends; the crash comes 2 steps into the second epoch, so
    # the latest checkpoint is the end of epoch 1.
    resumed, _, saved = crash_then_resume(tmp_path, job.STEPS_PER_EPOCH + 2, every_n_steps=None)
    assert saved[-1].endswith(f"step{job.STEPS_PER_EPOCH}.pt")
    assert_same_run(resumed, uninterrupted)


def test_resume_from_a_single_file_written_by_save_checkpoint(
    tmp_path: Path, uninterrupted: Any
) -> None:
    resumed, path, _ = crash_then_resume(tmp_path, 10, every_n_steps=None, single_file=True)
    assert path.is_file()
    assert_same_run(resumed, uninterrupted)
    fresh, _ = job.build(None, num_workers=0, extra=(Crash(),))
    values = fresh.load_checkpoint(path)
    assert values["note"] == "mid-epoch" and fresh.state.global_step == 10
    assert fresh.state.batches_seen_in_epoch == 2 * (10 - job.STEPS_PER_EPOCH)


def test_resume_with_fp16_restores_the_grad_scaler(tmp_path: Path) -> None:
    full, kwargs = job.build(None, num_workers=0, extra=(Crash(),), precision="fp16")
    full.train(**kwargs)
    resumed, _, _ = crash_then_resume(tmp_path, 10, every_n_steps=3, precision="fp16")
    assert_same_run(resumed, finished(full))
    assert resumed.scaler is not None and full.scaler is not None
    # The growth tracker counts every step since the last scale change: 21, not 21 - 9.
    assert resumed.scaler.state_dict() == full.scaler.state_dict()
    assert full.scaler.state_dict()["_growth_tracker"] == job.TOTAL_STEPS


def test_resume_neither_loads_nor_runs_skipped_batches(tmp_path: Path) -> None:
    full, kwargs = job.build(None, num_workers=0, extra=(Crash(),))
    full.train(**kwargs)
    full_fetched = kwargs["train_dataset"].fetched
    full_forwards = full.unwrapped_model.train_forwards
    assert len(full_fetched) == job.EPOCHS * job.NUM_SAMPLES

    # Saved at step 12 = 5 updates into epoch 2 = 10 micro-batches = 40 samples of it.
    resumed, _, saved = crash_then_resume(tmp_path, 13, every_n_steps=4)
    assert saved[-1].endswith("step12.pt")
    consumed = job.NUM_SAMPLES + 40
    fetched = resumed.train_dataset.fetched
    assert fetched == full_fetched[consumed:]  # nothing repeated, nothing skipped
    assert resumed.unwrapped_model.train_forwards == full_forwards - (13 + 10)
    assert resumed.state.global_step == job.TOTAL_STEPS


class Stream(torch.utils.data.IterableDataset):
    """An unsized stream of the same samples in the same order every epoch."""

    def __init__(self) -> None:
        self.data = job.CountingData(30, seed=3)

    def __iter__(self) -> Any:
        return (self.data[i] for i in range(len(self.data)))


def stream_trainer(ckpt: Path, crash_at: int | None) -> tuple[Trainer, dict[str, Any]]:
    model = job.DropoutMLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    save = SaveTrainingStateCallback(ckpt, every_n_steps=3, every_n_epochs=None)
    callbacks = [save, Crash(crash_at)]
    trainer = Trainer(model, torch.nn.CrossEntropyLoss(), opt, callbacks=callbacks, seed=5)
    return trainer, dict(
        train_dataset=Stream(), num_epochs=2, per_device_batch_size=4, gradient_accumulation_steps=2
    )


def test_resume_mid_epoch_from_an_iterable_dataset(tmp_path: Path) -> None:
    # 30 samples in batches of 4: 8 micro-batches, 4 updates per epoch. Saved at step 6 =
    # 2 updates into epoch 2 (4 micro-batches); the crash comes at step 7.
    full, kwargs = stream_trainer(tmp_path / "full", None)
    full.train(**kwargs)
    crashed, kwargs = stream_trainer(tmp_path / "ckpt", 7)
    with pytest.raises(CallbackError, match="simulated crash"):
        crashed.train(**kwargs)
    resumed, kwargs = stream_trainer(tmp_path / "ckpt", None)
    resumed.train(**kwargs, resume_from=tmp_path / "ckpt/ckpt-000002-step6.pt")
    assert resumed.state.global_step == full.state.global_step == 8
    # The stream is read past the 4 consumed micro-batches; only the last 4 are trained on.
    assert resumed.unwrapped_model.train_forwards == 4
    for key, value in full.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[key], value), key
    assert resumed.run_history.state_dict() == full.run_history.state_dict()


class SaveMidWindow(TrainerCallback):
    """Saves after the forward pass of the second micro-batch of the first window."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.batches_seen_in_epoch == 1 and trainer.state.epoch == 0:
            trainer.save_checkpoint(self.path)


def test_saving_inside_an_accumulation_window_warns(tmp_path: Path) -> None:
    trainer, kwargs = job.build(None, num_workers=0, extra=(SaveMidWindow(tmp_path / "a.pt"),))
    with pytest.warns(UserWarning, match="inside an accumulation window"):
        trainer.train(**kwargs)
    # Saves at optimizer steps and epoch ends (SaveTrainingStateCallback) never warn.
    trainer, kwargs = job.build(tmp_path / "ckpt", every_n_steps=1, num_workers=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer.train(**kwargs)


class StopAt(TrainerCallback):
    """``trainer.stop_training()`` at a given optimizer step."""

    def __init__(self, at_step: int | None = None) -> None:
        self.at_step = at_step

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.at_step:
            trainer.stop_training()


@pytest.mark.parametrize("how", ["stop_training", "max_num_train_steps"])
def test_a_run_stopped_mid_epoch_resumes_inside_that_epoch(
    tmp_path: Path, uninterrupted: Any, how: str
) -> None:
    """Stopped at step 10 (3 updates into epoch 2): the epoch still ends (evaluation,
    epoch-end callbacks, an epoch-end checkpoint) as in pytorch-accelerated, but the state
    stays inside it, so the newest checkpoint resumes at that step, not at the next epoch,
    and the resumed run neither stops at once nor skips the rest of the epoch."""
    ckpt = tmp_path / "ckpt"
    stopped, kwargs = job.build(
        ckpt, num_workers=0, extra=(StopAt(10 if how == "stop_training" else None),)
    )
    if how == "max_num_train_steps":
        kwargs["max_num_train_steps"] = 10
    stopped.train(**kwargs)
    assert stopped.state.global_step == 10 and stopped.state.epoch == 1
    assert stopped.state.batches_seen_in_epoch == 2 * (10 - job.STEPS_PER_EPOCH)
    assert len(stopped.run_history.get_metric_values("eval_loss_epoch")) == 2  # epoch 2 ended
    resumed, kwargs = job.build(ckpt, num_workers=0, extra=(StopAt(),))
    if how == "max_num_train_steps":  # resumed without the limit: a longer plan, said so
        with pytest.warns(UserWarning, match=r"planned for 10 optimizer updates"):
            resumed.train(**kwargs, resume_from=ckpt)
    else:
        resumed.train(**kwargs, resume_from=ckpt)
    assert resumed.state.global_step == job.TOTAL_STEPS
    fetched = resumed.train_dataset.fetched
    assert len(fetched) == job.EPOCHS * job.NUM_SAMPLES - (job.NUM_SAMPLES + 6 * job.BATCH)
    weights, ema, history = finished(resumed)
    # The history keeps what the stopped run recorded when its epoch ended: epoch 2 has an
    # evaluation from the stop and one from its real end.
    evals = history["metrics"]["eval_loss_epoch"]
    assert len(evals) == job.EPOCHS + 1
    if how == "max_num_train_steps":
        return  # its learning-rate schedule was built for 10 steps: other weights, rightly
    for got, want in ((weights, uninterrupted[0]), (ema, uninterrupted[1])):
        for key in got:
            assert torch.equal(got[key], want[key]), f"{key} differs"
    assert [evals[0], *evals[2:]] == uninterrupted[2]["metrics"]["eval_loss_epoch"]
