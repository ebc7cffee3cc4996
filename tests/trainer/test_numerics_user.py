"""A practitioner's numerics checks: mixed precision set-up errors, learning-rate schedules
over parameter groups, and resuming across precisions, each against what a hand-written
PyTorch loop or the docs say.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.schedulers import CosineWarmupScheduler, WSDScheduler


def test_an_unknown_precision_from_accelerate_launch_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``accelerate launch --mixed_precision fp8`` sets the variable; the user passed no
    precision, so the error must say where the value came from and how to override it."""
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp8")
    with pytest.raises(ValueError, match="ACCELERATE_MIXED_PRECISION") as info:
        make_trainer(TinyMLP())
    message = str(info.value)
    assert "'fp8'" in message and "'bf16'" in message and "precision=" in message


def test_float32_is_accepted_like_float16_and_bfloat16() -> None:
    assert make_trainer(TinyMLP(), precision="float32").precision == "no"
    assert make_trainer(TinyMLP(), precision="float16").precision == "fp16"


def test_fp16_with_a_half_precision_model_says_to_keep_the_weights_in_float32() -> None:
    """``model.half()`` plus ``precision="fp16"``: the GradScaler cannot unscale fp16
    gradients. torch says only "Attempting to unscale FP16 gradients."; the error must
    say what was received, why and how to fix it."""
    model = TinyMLP().half()
    data = blobs(n=16)
    data.tensors = (data.tensors[0].half(), data.tensors[1])
    trainer = make_trainer(model, precision="fp16")
    with pytest.raises(ValueError, match=r"float16.*model\.float\(\)") as info:
        trainer.train(data, num_epochs=1, per_device_batch_size=4)
    assert "precision='fp16'" in str(info.value)


class UnfreezeHeadAt(TrainerCallback):
    """Gradual unfreezing: after update ``step``, the head joins the optimizer as a new
    parameter group (``ModelFreezer.unfreeze`` documents that use); records every update's
    learning rates."""

    def __init__(self, step: int, lr: float) -> None:
        self.step, self.lr = step, lr
        self.lrs: list[list[float]] = []

    def on_train_step_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.lrs.append([g["lr"] for g in trainer.optimizer.param_groups])

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            head = trainer.unwrapped_model.net[2]
            head.requires_grad_(True)
            trainer.optimizer.add_param_group({"params": list(head.parameters()), "lr": self.lr})


@pytest.mark.parametrize(
    "schedule",
    [
        CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1),
        WSDScheduler.create_scheduler_fn(num_warmup_epochs=1, decay_fraction=0.5),
    ],
    ids=["cosine", "wsd"],
)
def test_a_parameter_group_added_mid_run_follows_the_schedule(schedule: Any) -> None:
    """Unfreezing layers adds a parameter group while the scheduler runs. The shipped
    schedulers crashed at the next step (torch's ``zip() argument 2 is shorter than
    argument 1``); the new group now follows the schedule from the learning rate it was
    added with, as the first group follows its own."""
    model = TinyMLP()
    model.net[2].requires_grad_(False)
    optimizer = torch.optim.SGD(model.net[0].parameters(), lr=0.1)
    unfreeze = UnfreezeHeadAt(step=3, lr=0.02)
    trainer = Trainer(model, nn.CrossEntropyLoss(), optimizer, callbacks=[unfreeze])
    trainer.train(blobs(n=32), num_epochs=2, per_device_batch_size=4, create_scheduler_fn=schedule)
    assert trainer.state.global_step == 16
    assert all(len(lrs) == 1 for lrs in unfreeze.lrs[:3])
    for lrs in unfreeze.lrs[4:]:  # update 4 on: scheduled, with the first group's factor
        assert lrs[1] == pytest.approx(lrs[0] * 0.02 / 0.1, rel=1e-9)
    assert trainer.scheduler is not None
    assert trainer.scheduler.state_dict()["base_lrs"] == [0.1, 0.02]


def test_a_full_precision_checkpoint_resumes_under_fp16_with_a_fresh_loss_scale(
    tmp_path: Path,
) -> None:
    """Switching a run to fp16 when resuming it (to go faster) is refused with advice that
    cannot be followed. The other way (fp16 checkpoint resumed in full precision) works:
    the saved loss scale is ignored. A fresh GradScaler is what a run without a saved scale
    needs."""
    path = tmp_path / "fp32.pt"
    first = make_trainer(TinyMLP())
    first.train(blobs(n=16), num_epochs=1, per_device_batch_size=4)
    first.save_checkpoint(path)
    resumed = make_trainer(TinyMLP(), precision="fp16")
    resumed.train(blobs(n=16), num_epochs=2, per_device_batch_size=4, resume_from=path)
    assert resumed.state.global_step == 8
    assert resumed.scaler is not None and resumed.scaler.get_scale() == 2.0**16


class PlateauOnEvalLoss(TrainerCallback):
    """What the refusal of ``ReduceLROnPlateau`` tells the user to write, word for word."""

    def __init__(self) -> None:
        self.scheduler: torch.optim.lr_scheduler.ReduceLROnPlateau | None = None

    def on_training_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            trainer.optimizer, patience=0, factor=0.5
        )

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        assert self.scheduler is not None
        self.scheduler.step(trainer.run_history.get_latest_metric("eval_loss_epoch"))


def test_the_plateau_refusal_points_only_to_ways_that_step_once_per_epoch() -> None:
    """The refusal offered two fixes; the second, "override Trainer.scheduler_step to pass
    the value it needs", runs after every update: passing ``eval_loss_epoch`` there fails
    at the first update (no evaluation yet) and later counts patience in updates. The
    message must say so, and its first fix must work as written."""
    plateau = partial(torch.optim.lr_scheduler.ReduceLROnPlateau, patience=2)
    with pytest.raises(TypeError) as info:
        make_trainer(TinyMLP()).train(
            blobs(n=16), num_epochs=2, per_device_batch_size=4, create_scheduler_fn=plateau
        )
    message = " ".join(str(info.value).split())
    assert "on_training_run_epoch_end" in message
    assert "after every optimizer update" in message and "not epochs" in message
    assert "state_dict" in message  # the callback's scheduler is not saved otherwise

    callback = PlateauOnEvalLoss()
    trainer = make_trainer(TinyMLP(), callbacks=[callback])
    trainer.train(
        blobs(n=32), num_epochs=4, per_device_batch_size=4, eval_dataset=blobs(n=16, seed=1)
    )
    losses = trainer.run_history.get_metric_values("eval_loss_epoch")
    best, reductions = float("inf"), 0
    for loss in losses:  # mode "min", relative threshold 1e-4, patience 0
        if loss < best * (1 - 1e-4):
            best = loss
        else:
            reductions += 1
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**reductions)


@pytest.mark.parametrize("cls", [CosineWarmupScheduler, WSDScheduler])
@pytest.mark.parametrize(
    "bad", [{"min_lr_ratio": -0.1}, {"warmup_start_factor": -1.0}, {"min_lr_ratio": math.nan}]
)
def test_a_negative_or_nan_learning_rate_factor_is_refused(cls: Any, bad: dict[str, float]) -> None:
    """``min_lr_ratio=-0.1`` made the last updates use a negative learning rate (SGD then
    climbs the loss) and NaN made every rate NaN, without a word."""
    ((name, value),) = bad.items()
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match=rf"{name}.*received {value}"):
        cls(optimizer, total_steps=4, warmup_steps=1, **bad)


@pytest.mark.parametrize("cls", [CosineWarmupScheduler, WSDScheduler])
def test_the_scheduler_factory_passed_uncalled_says_to_call_it(cls: Any) -> None:
    """``create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn`` (no parentheses)
    failed with "takes 1 positional argument but 2 were given"."""
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.create_scheduler_fn\(num_warmup"):
        make_trainer(TinyMLP()).train(
            blobs(n=16), num_epochs=1, per_device_batch_size=4,
            create_scheduler_fn=cls.create_scheduler_fn,
        )  # fmt: skip


@pytest.mark.parametrize("cls", [CosineWarmupScheduler, WSDScheduler])
def test_the_scheduler_class_as_create_scheduler_fn_says_how_to_give_its_length(
    cls: Any,
) -> None:
    """``create_scheduler_fn=CosineWarmupScheduler`` failed with "missing 1 required
    positional argument: 'total_steps'", which names neither the Trainer's placeholder
    nor the factory."""
    trainer = make_trainer(TinyMLP())
    with pytest.raises(TypeError, match=r"total_steps.*create_scheduler_fn\(.*TOTAL_UPDATE_STEPS"):
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4, create_scheduler_fn=cls)
    assert trainer.state.global_step == 0


class FirstLr(TrainerCallback):
    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_train_step_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.lrs.append(trainer.optimizer.param_groups[0]["lr"])


@pytest.mark.parametrize("middle", [False, True], ids=["", "after-a-run-without-schedule"])
@pytest.mark.parametrize("change", [True, False])
def test_a_second_train_call_schedules_from_the_learning_rate_set_in_between(
    change: bool, middle: bool
) -> None:
    """Two-stage fine-tuning: stage 2 lowers the learning rate by hand and trains with a
    new schedule, which starts from that rate, not from stage 1's peak (the 'initial_lr'
    stage 1's scheduler left on the group). Left unchanged, stage 2 restarts at stage
    1's peak, as each train() call builds its scheduler anew. A run without a scheduler
    in between does not change this (the hand-set rate was ignored after one)."""
    seen = FirstLr()
    trainer = make_trainer(TinyMLP(), lr=0.1, callbacks=[seen])
    schedule = CosineWarmupScheduler.create_scheduler_fn()
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4,
                  create_scheduler_fn=schedule)  # fmt: skip
    if middle:
        trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4)
    if change:
        for group in trainer.optimizer.param_groups:
            group["lr"] = 0.001
    seen.lrs.clear()
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4,
                  create_scheduler_fn=schedule)  # fmt: skip
    if change or not middle:
        assert seen.lrs[0] == pytest.approx(0.001 if change else 0.1)
        assert max(seen.lrs) == pytest.approx(0.001 if change else 0.1)
    else:  # the rate the middle run kept (stage 1's last) is not a rate set by hand
        assert max(seen.lrs) == pytest.approx(0.1)
