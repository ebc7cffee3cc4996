"""Numbers a careful user checks: best-model and early-stopping decisions across resumes,
NaN and missing metric values, EMA weights outside training, logged learning rates, and
fp16 overflow steps, each against what a hand-written loop or the docs say.
"""

from __future__ import annotations

import json
import math
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import (
    CallbackError,
    EarlyStoppingCallback,
    ModelEmaCallback,
    SaveBestModelCallback,
    SaveTrainingStateCallback,
    StopTrainingError,
    TrainerCallback,
)
from scramjet.checkpoint import read_checkpoint


class ScriptedScore(TrainerCallback):
    """Records ``score`` = ``scores[epoch]`` at the end of each training epoch (None: none)."""

    def __init__(self, scores: list[float | None]) -> None:
        self.scores = scores

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        value = self.scores[trainer.state.epoch]
        if value is not None:
            trainer.run_history.update_metric("score", value)


class Snapshots(TrainerCallback):
    """The model's weights at the end of every epoch."""

    def __init__(self) -> None:
        self.weights: list[dict[str, torch.Tensor]] = []

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.weights.append({k: v.clone() for k, v in trainer.unwrapped_model.state_dict().items()})


class CrashAfterEpoch(TrainerCallback):
    """Fails the run at the end of epoch ``epoch`` (0-based), after the checkpoint of it."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.epoch == self.epoch:
            raise RuntimeError("simulated crash")


def _equal_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------- resume keeps decisions
SCORES: list[float | None] = [1.0, 0.5, 0.6, 0.7, 0.8, 0.9]


def _run_with_decisions(folder: Path, *, crash_at: int | None, resume: bool) -> Any:
    stopper = EarlyStoppingCallback(3, 0.0, watch_metric="score")
    best = SaveBestModelCallback(folder / "best.pt", watch_metric="score")
    callbacks: list[TrainerCallback] = [
        ScriptedScore(SCORES),
        stopper,
        best,
        SaveTrainingStateCallback(folder / "ckpt", async_write=False, save_on_preemption=False),
    ]
    if crash_at is not None:
        callbacks.append(CrashAfterEpoch(crash_at))
    trainer = make_trainer(TinyMLP(), callbacks=callbacks, seed=0)
    try:
        trainer.train(
            blobs(n=16), num_epochs=6, per_device_batch_size=4,
            resume_from=folder / "ckpt" if resume else None,
        )  # fmt: skip
    except RuntimeError:
        assert crash_at is not None
    return trainer, stopper, best


def test_a_resumed_run_keeps_the_early_stopping_count_and_stops_where_the_whole_run_does(
    tmp_path: Path,
) -> None:
    whole, stopper, _ = _run_with_decisions(tmp_path / "whole", crash_at=None, resume=False)
    assert whole.run_history.get_metric_values("score") == [1.0, 0.5, 0.6, 0.7, 0.8]
    _run_with_decisions(tmp_path / "cut", crash_at=2, resume=False)
    resumed, r_stopper, _ = _run_with_decisions(tmp_path / "cut", crash_at=None, resume=True)
    # Before the fix the resumed run forgot best=0.5, took 0.7 as best and ran all 6 epochs.
    assert resumed.run_history.get_metric_values("score") == [1.0, 0.5, 0.6, 0.7, 0.8]
    assert isinstance(resumed.stop_reason, StopTrainingError)
    assert r_stopper.state_dict() == stopper.state_dict() == {
        "best": 0.5, "epochs_without_improvement": 3,
    }  # fmt: skip


def test_a_resumed_run_does_not_overwrite_the_best_model_with_a_worse_epoch(
    tmp_path: Path,
) -> None:
    _run_with_decisions(tmp_path, crash_at=2, resume=False)
    saved = read_checkpoint(tmp_path / "best.pt")["state"]
    resumed, _, best = _run_with_decisions(tmp_path, crash_at=None, resume=True)
    assert best.best == 0.5 and saved["score"] == 0.5
    again = read_checkpoint(tmp_path / "best.pt")["state"]
    assert _equal_weights(saved["model"], again["model"])  # epoch 2's weights, score 0.5
    assert _equal_weights(resumed.unwrapped_model.state_dict(), saved["model"])


def test_reset_on_train_still_forgets_the_best_value_in_a_new_run(tmp_path: Path) -> None:
    stopper = EarlyStoppingCallback(2, 0.0, watch_metric="score")
    best = SaveBestModelCallback(tmp_path / "best.pt", watch_metric="score")
    scripted = ScriptedScore([0.1])
    trainer = make_trainer(TinyMLP(), callbacks=[scripted, stopper, best])
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    assert stopper.best == best.best == 0.1
    scripted.scores = [0.4]
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    assert stopper.best == best.best == 0.4  # a new train() starts its own comparison


def test_loading_a_checkpoint_then_training_anew_still_resets_the_best_value(
    tmp_path: Path,
) -> None:
    stopper = EarlyStoppingCallback(2, 0.0, watch_metric="score")
    scripted = ScriptedScore([0.1])
    trainer = make_trainer(TinyMLP(), callbacks=[scripted, stopper])
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    trainer.save_checkpoint(tmp_path / "one.pt")
    trainer.load_checkpoint(tmp_path / "one.pt")  # restores stopper.best = 0.1 too
    scripted.scores = [0.4]
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)  # a new run, not a resume
    assert stopper.best == 0.4


# ---------------------------------------------------------------- NaN and missing values
def test_a_nan_metric_never_becomes_the_best_model(tmp_path: Path) -> None:
    snaps = Snapshots()
    best = SaveBestModelCallback(tmp_path / "best.pt", watch_metric="score")
    model = TinyMLP()
    trainer = make_trainer(model, callbacks=[ScriptedScore([math.nan, 0.9, 0.3, 0.5]), snaps, best])
    trainer.train(blobs(n=8), num_epochs=4, per_device_batch_size=4)
    # Before the fix epoch 1 (NaN) stayed "best" for ever: nothing compares below NaN.
    assert best.best == 0.3
    assert _equal_weights(model.state_dict(), snaps.weights[2])


def test_early_stopping_counts_a_nan_as_no_improvement_and_then_sees_real_ones() -> None:
    stopper = EarlyStoppingCallback(2, 0.0, watch_metric="score")
    trainer = make_trainer(
        TinyMLP(), callbacks=[ScriptedScore([math.nan, 0.9, 0.8, math.nan, math.nan, 0.1]), stopper]
    )
    trainer.train(blobs(n=8), num_epochs=6, per_device_batch_size=4)
    assert stopper.best == 0.8
    assert len(trainer.run_history.get_metric_values("score")) == 5  # stopped after 2 NaNs
    assert "has not improved on 0.8 for 2 epoch(s)" in str(trainer.stop_reason)


def test_early_stopping_on_nan_only_says_so_instead_of_failing_to_format() -> None:
    stopper = EarlyStoppingCallback(2, 0.0, watch_metric="score")
    trainer = make_trainer(TinyMLP(), callbacks=[ScriptedScore([math.nan] * 3), stopper])
    trainer.train(blobs(n=8), num_epochs=3, per_device_batch_size=4)
    assert isinstance(trainer.stop_reason, StopTrainingError)
    assert "score has been NaN for 2 epoch(s)" in str(trainer.stop_reason)


def test_epochs_that_record_no_new_value_do_not_use_up_early_stopping_patience() -> None:
    # The metric is measured every other epoch and improves every time it is measured.
    scores: list[float | None] = [0.9, None, 0.8, None, 0.7, None]
    stopper = EarlyStoppingCallback(1, 0.0, watch_metric="score")
    trainer = make_trainer(TinyMLP(), callbacks=[ScriptedScore(scores), stopper])
    trainer.train(blobs(n=8), num_epochs=6, per_device_batch_size=4)
    # Before the fix epoch 2 re-read 0.9 as "not improved" and stopped the run there.
    assert trainer.stop_reason is None and trainer.state.epoch == 6
    assert stopper.best == 0.7 and stopper.epochs_without_improvement == 0


def test_a_metric_never_recorded_is_still_a_clear_error() -> None:
    stopper = EarlyStoppingCallback(1, 0.0, watch_metric="scroe")
    trainer = make_trainer(TinyMLP(), callbacks=[ScriptedScore([0.5]), stopper])
    with pytest.raises(CallbackError, match=r"scroe.*recorded metrics.*score"):
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)


# ---------------------------------------------------------------- EMA outside training
def test_evaluate_after_training_scores_the_weights_predict_uses() -> None:
    data = blobs(n=32)
    model = TinyMLP()
    ema = ModelEmaCallback(decay=0.9)
    trainer = make_trainer(model, lr=0.5, callbacks=[ema])
    trainer.train(data, num_epochs=2, per_device_batch_size=8, eval_dataset=data)
    during = trainer.run_history.get_latest_metric("eval_loss_epoch")
    assert ema.ema_model is not None
    x, y = data.tensors
    with torch.no_grad():
        assert during == pytest.approx(float(nn.functional.cross_entropy(ema.ema_model(x), y)))
    trainer.evaluate(data, per_device_batch_size=8)
    after = trainer.run_history.get_latest_metric("eval_loss_epoch")
    predicted = trainer.predict(data, per_device_batch_size=8)
    # Before the fix evaluate() swapped in the EMA weights after training as well, so its
    # loss disagreed with the outputs predict() returns for the same data.
    assert after == pytest.approx(float(nn.functional.cross_entropy(predicted, y)), rel=1e-6)


# ---------------------------------------------------------------- learning rate as logged
def test_the_learning_rate_logged_for_an_update_is_the_one_it_applied(tmp_path: Path) -> None:
    from scramjet.tracking import Experiment

    applied: dict[int, float] = {}

    class Applied(TrainerCallback):
        def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
            applied[trainer.state.global_step + 1] = trainer.optimizer.param_groups[0]["lr"]

    exp = Experiment("probe", "lr", root=str(tmp_path), log_every_n_steps=1)
    trainer = make_trainer(TinyMLP(), lr=1.0, callbacks=[Applied(), exp])
    schedule = partial(torch.optim.lr_scheduler.LambdaLR, lr_lambda=lambda s: 0.1 * (s + 1))
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4, create_scheduler_fn=schedule)
    rows = [
        json.loads(line) for line in next(tmp_path.rglob("metrics.jsonl")).read_text().splitlines()
    ]
    logged = {r["step"]: r["metrics"]["lr"] for r in rows if r["scope"] == "step"}
    assert applied == pytest.approx({1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4})
    assert logged == pytest.approx(applied)  # was {1: 0.2, 2: 0.3, 3: 0.4, 4: 0.5}


# ---------------------------------------------------------------- fp16 overflow steps
def _fp16_trainer_whose_first_updates_overflow(scheduler: bool) -> tuple[Trainer, Any]:
    model = TinyMLP()
    trainer = make_trainer(model, lr=0.1, precision="fp16")
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)  # the first steps overflow
    schedule = partial(torch.optim.lr_scheduler.LambdaLR, lr_lambda=lambda s: 1.0 / (1 + s))
    return trainer, schedule if scheduler else None


def test_fp16_overflow_steps_match_the_hand_written_grad_scaler_loop() -> None:
    data = blobs(n=24)
    trainer, _ = _fp16_trainer_whose_first_updates_overflow(scheduler=False)
    reference = TinyMLP()
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    x, y = data.tensors
    for start in range(0, 24, 4):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.cross_entropy(
                reference(x[start : start + 4]), y[start : start + 4]
            )
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    trainer.train(
        data, num_epochs=1, per_device_batch_size=4, gradient_clip_norm=0.5,
        train_dataloader_kwargs={"shuffle": False},
    )  # fmt: skip
    assert trainer.scaler is not None and trainer.scaler.get_scale() == scaler.get_scale() < 2**40
    # An overflow step changes no weight but counts as an update (as in HF accelerate's loop).
    assert trainer.state.global_step == 6
    for a, b in zip(trainer.unwrapped_model.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_an_fp16_overflow_on_the_first_update_gives_no_scheduler_order_warning() -> None:
    trainer, schedule = _fp16_trainer_whose_first_updates_overflow(scheduler=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*lr_scheduler.step.*before.*optimizer.step")
        trainer.train(
            blobs(n=8), num_epochs=1, per_device_batch_size=4, create_scheduler_fn=schedule
        )
    # Both updates overflowed: the optimizer did not step, so neither did the schedule.
    assert trainer.state.global_step == 2 and trainer.scheduler is not None
    assert trainer.scheduler.last_epoch == 0


# ---------------------------------------------------------------- placeholders misused
def _train_with_schedule(create_scheduler_fn: Any, **kwargs: Any) -> Trainer:
    trainer = make_trainer(TinyMLP())
    trainer.train(
        blobs(n=40), num_epochs=2, per_device_batch_size=4,
        create_scheduler_fn=create_scheduler_fn, **kwargs,
    )  # fmt: skip
    return trainer


def test_a_placeholder_inside_a_lambda_says_it_has_no_value_and_how_to_pass_it() -> None:
    from torch.optim.lr_scheduler import OneCycleLR

    from scramjet.schedulers import TrainerPlaceholderValues as P

    def in_a_lambda(opt: Any) -> Any:
        return OneCycleLR(opt, max_lr=0.1, total_steps=P.TOTAL_UPDATE_STEPS)

    # Before: "'<=' not supported between instances of '_Placeholder' and 'int'".
    with pytest.raises(TypeError, match=r"TOTAL_UPDATE_STEPS, which has no value yet.*partial"):
        _train_with_schedule(in_a_lambda)
    with pytest.raises(TypeError, match=r"int\(\) received \(TrainerPlaceholderValues"):
        int(P.TOTAL_UPDATE_STEPS * 0.1)


def test_placeholder_arithmetic_covers_modulo_power_and_negation() -> None:
    from scramjet.schedulers import TrainerPlaceholderValues as P
    from scramjet.schedulers import resolve_placeholders

    fn = partial(dict, mod=P.NUM_EPOCHS % 3, power=2**P.NUM_EPOCHS, neg=-P.NUM_EPOCHS)
    assert resolve_placeholders(fn, {"num_epochs": 4})() == {"mod": 1, "power": 16, "neg": -4}
    assert repr(-P.NUM_EPOCHS) == "(-TrainerPlaceholderValues.NUM_EPOCHS)"


def test_a_warmup_longer_than_the_run_says_which_arguments_to_change() -> None:
    from scramjet.schedulers import CosineWarmupScheduler

    fn = CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1)  # 10 updates per epoch
    with pytest.raises(ValueError, match=r"total_steps \(5 optimizer updates\); received 10.*"
                       r"num_warmup_epochs.*max_num_train_steps"):  # fmt: skip
        _train_with_schedule(fn, max_num_train_steps=5)
