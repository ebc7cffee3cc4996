"""Step-based schedulers: values at key steps, state round trip, placeholders from the Trainer."""

from __future__ import annotations

import functools
import inspect
import itertools
import math
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer

import scramjet.callbacks as schedulers_callbacks
import scramjet.schedulers as schedulers
from scramjet import Trainer
from scramjet.schedulers import (
    CosineWarmupScheduler,
    TrainerPlaceholderValues,
    WSDScheduler,
    resolve_placeholders,
)


def _opt(lr: float = 1.0) -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def _lrs(sched: Any, steps: int) -> list[float]:
    """The learning rate in effect for each update 0..steps-1."""
    out = []
    for _ in range(steps):
        out.append(sched.optimizer.param_groups[0]["lr"])
        sched.optimizer.step()
        sched.step()
    return out


def test_cosine_warmup_key_steps() -> None:
    sched = CosineWarmupScheduler(_opt(2.0), total_steps=20, warmup_steps=4, min_lr_ratio=0.1)
    lrs = _lrs(sched, 21)
    assert lrs[0] == pytest.approx(0.0)
    assert lrs[2] == pytest.approx(1.0)  # half-way through warmup
    assert lrs[4] == pytest.approx(2.0)  # peak
    assert lrs[12] == pytest.approx(2.0 * (0.1 + 0.9 * 0.5))  # cosine mid-point
    assert lrs[20] == pytest.approx(0.2)  # floor
    assert all(a >= b for a, b in itertools.pairwise(lrs[4:])), "monotone decay after warmup"
    sched.step()
    assert sched.get_last_lr()[0] == pytest.approx(0.2), "stays at the floor past total_steps"


def test_wsd_key_steps() -> None:
    sched = WSDScheduler(_opt(1.0), total_steps=20, warmup_steps=2, decay_fraction=0.25)
    lrs = _lrs(sched, 21)
    assert lrs[:3] == pytest.approx([0.0, 0.5, 1.0])
    assert lrs[3:15] == pytest.approx([1.0] * 12)  # stable plateau until step 15
    assert lrs[15] == pytest.approx(1.0)
    assert lrs[17] == pytest.approx(0.6)  # linear decay over 5 steps
    assert lrs[20] == pytest.approx(0.0)


@pytest.mark.parametrize(("shape", "mid"), [("cosine", 0.5), ("sqrt", 1 - math.sqrt(0.5))])
def test_wsd_decay_shapes(shape: str, mid: float) -> None:
    sched = WSDScheduler(_opt(1.0), total_steps=10, decay_fraction=0.4, decay_shape=shape)
    assert _lrs(sched, 9)[8] == pytest.approx(mid)


@pytest.mark.parametrize("cls", [CosineWarmupScheduler, WSDScheduler])
def test_state_dict_round_trip(cls: Any) -> None:
    """A restored scheduler (with its optimizer, as a checkpoint holds both) continues identically."""
    a = cls(_opt(), total_steps=20, warmup_steps=5)
    _lrs(a, 9)
    b = cls(_opt(), total_steps=20, warmup_steps=5)
    b.optimizer.load_state_dict(a.optimizer.state_dict())
    b.load_state_dict(a.state_dict())
    assert b.last_epoch == 9
    assert b.get_last_lr() == pytest.approx(a.get_last_lr())
    resumed = _lrs(b, 10)
    assert _lrs(a, 10) == pytest.approx(resumed)
    uninterrupted = _lrs(cls(_opt(), total_steps=20, warmup_steps=5), 19)
    assert uninterrupted[9:] == pytest.approx(resumed)
    assert len(set(resumed)) > 1, "the window covers changing values"


def test_bad_scheduler_arguments() -> None:
    with pytest.raises(ValueError, match="warmup_steps must be between 0 and total_steps"):
        CosineWarmupScheduler(_opt(), total_steps=5, warmup_steps=6)
    with pytest.raises(ValueError, match="decay_shape must be one of"):
        WSDScheduler(_opt(), total_steps=5, decay_shape="exp")


def test_trainer_resolves_placeholders_with_accumulation() -> None:
    """22 samples / batch 2 = 11 batches; accumulation 3 → 4 updates per epoch (3+3+3+2)."""
    seen: dict[str, Any] = {}

    def make(optimizer: torch.optim.Optimizer, **values: Any) -> Any:
        seen.update(values)
        return CosineWarmupScheduler(
            optimizer, total_steps=values["total"], warmup_steps=values["warmup"]
        )

    P = TrainerPlaceholderValues
    fn = functools.partial(
        make,
        per_epoch=P.NUM_UPDATE_STEPS_PER_EPOCH,
        total=P.TOTAL_UPDATE_STEPS,
        warmup=P.NUM_UPDATE_STEPS_PER_EPOCH // 2,
        epochs=P.NUM_EPOCHS,
        bs=P.PER_PROCESS_BATCH_SIZE,
        accum=P.GRADIENT_ACCUMULATION_STEPS,
        procs=P.NUM_PROCESSES,
        scaled=2 * P.NUM_EPOCHS + 1,
    )
    trainer = make_trainer(TinyMLP())
    trainer.train(
        blobs(n=22),
        num_epochs=3,
        per_device_batch_size=2,
        gradient_accumulation_steps=3,
        create_scheduler_fn=fn,
    )
    assert seen == {
        "per_epoch": 4,
        "total": 12,
        "warmup": 2,
        "epochs": 3,
        "bs": 2,
        "accum": 3,
        "procs": 1,
        "scaled": 7,
    }
    assert trainer.scheduler.last_epoch == trainer.state.global_step == 12
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.0), "decayed to the end"


def test_create_scheduler_fn_classmethod_in_trainer() -> None:
    trainer = make_trainer(TinyMLP())
    fn = WSDScheduler.create_scheduler_fn(num_warmup_epochs=0.5, decay_fraction=0.5)
    trainer.train(
        blobs(n=20),
        num_epochs=2,
        per_device_batch_size=4,
        max_num_train_steps=7,
        create_scheduler_fn=fn,
    )
    sched = trainer.scheduler
    assert isinstance(sched, WSDScheduler)
    assert (sched.total_steps, sched.warmup_steps, sched.decay_steps) == (7, 3, 4)


class _Stream(torch.utils.data.IterableDataset):
    """A dataset without a length: 20 samples of blobs()."""

    def __iter__(self) -> Any:
        data = blobs(n=20)
        return (data[i] for i in range(len(data)))


def test_iterable_dataset_schedulers_take_max_num_train_steps() -> None:
    trainer = make_trainer(TinyMLP())
    trainer.train(
        _Stream(),
        num_epochs=3,
        per_device_batch_size=4,
        max_num_train_steps=12,
        create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(),
    )
    assert trainer.scheduler.total_steps == 12
    # 5 batches per pass: passes of 5, 5 and 2 updates, the budget ends the third.
    assert trainer.state.global_step == 12
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 3


def test_iterable_dataset_without_a_step_budget_says_how_to_fix() -> None:
    trainer = make_trainer(TinyMLP())
    with pytest.raises(
        ValueError, match=r"total_steps must be ≥ 1; received 0.*max_num_train_steps"
    ):
        trainer.train(
            _Stream(),
            num_epochs=1,
            per_device_batch_size=4,
            create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(),
        )
    with pytest.raises(ValueError, match="num_warmup_epochs=1 needs the number of updates"):
        trainer.train(
            _Stream(),
            num_epochs=1,
            per_device_batch_size=4,
            max_num_train_steps=6,
            create_scheduler_fn=CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=1),
        )


@pytest.mark.parametrize(
    ("make", "budget", "named", "fix"),
    [
        (
            lambda P: functools.partial(
                torch.optim.lr_scheduler.StepLR, step_size=P.NUM_UPDATE_STEPS_PER_EPOCH
            ),
            6,
            "NUM_UPDATE_STEPS_PER_EPOCH",
            "__len__",
        ),
        (
            lambda P: functools.partial(
                torch.optim.lr_scheduler.OneCycleLR, max_lr=0.1, total_steps=P.TOTAL_UPDATE_STEPS
            ),
            None,
            "TOTAL_UPDATE_STEPS",
            "max_num_train_steps",
        ),
    ],
)
def test_a_length_placeholder_without_a_length_names_itself_and_the_fix(
    make: Any, budget: int | None, named: str, fix: str
) -> None:
    # torch's own schedulers, given 0, fail with "integer modulo by zero" at the first
    # step or "Expected positive integer total_steps"; the Trainer says what is missing.
    trainer = make_trainer(TinyMLP())
    with pytest.raises(ValueError, match=rf"TrainerPlaceholderValues\.{named} is unknown.*{fix}"):
        trainer.train(
            _Stream(),
            num_epochs=1,
            per_device_batch_size=4,
            max_num_train_steps=budget,
            create_scheduler_fn=make(TrainerPlaceholderValues),
        )


def test_placeholders_inside_containers_and_dataloader_lengths() -> None:
    P = TrainerPlaceholderValues
    seen: dict[str, Any] = {}

    def make(opt: torch.optim.Optimizer, milestones: list[Any], info: dict[str, Any]) -> Any:
        seen.update(milestones=milestones, **info)
        return torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.1)

    fn = functools.partial(
        make,
        milestones=[P.NUM_UPDATE_STEPS_PER_EPOCH, 2 * P.NUM_UPDATE_STEPS_PER_EPOCH],
        info={"train_len": P.TRAIN_DATALOADER_LEN, "eval_len": (P.EVAL_DATALOADER_LEN,)},
    )
    trainer = make_trainer(TinyMLP(), lr=1.0)
    trainer.train(
        blobs(n=20),
        num_epochs=3,
        per_device_batch_size=4,
        eval_dataset=blobs(n=6),
        eval_per_device_batch_size=4,
        create_scheduler_fn=fn,
    )
    assert seen == {"milestones": [5, 10], "train_len": 5, "eval_len": (2,)}
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.01), "both milestones hit"


def test_strings_are_never_evaluated() -> None:
    """Placeholders are objects; a string argument is passed through untouched."""
    fn = functools.partial(dict, a="TrainerPlaceholderValues.NUM_EPOCHS", b="__import__('os')")
    resolved = resolve_placeholders(fn, {"num_epochs": 3})
    assert resolved() == {"a": "TrainerPlaceholderValues.NUM_EPOCHS", "b": "__import__('os')"}
    assert "eval(" not in inspect.getsource(schedulers)


def test_missing_placeholder_value_is_a_clear_error() -> None:
    fn = functools.partial(dict, n=TrainerPlaceholderValues.NUM_EPOCHS)
    with pytest.raises(ValueError, match="Placeholder 'num_epochs' has no value here"):
        resolve_placeholders(fn, {})


def test_placeholder_arithmetic_both_ways() -> None:
    P = TrainerPlaceholderValues
    values = {"num_epochs": 4, "total_update_steps": 40}
    fn = functools.partial(
        dict,
        a=100 / P.NUM_EPOCHS,
        b=100 // P.NUM_EPOCHS,
        c=1 - P.NUM_EPOCHS,
        d=P.TOTAL_UPDATE_STEPS / P.NUM_EPOCHS,
        e=3 * P.NUM_EPOCHS + 1,
        f=P.TOTAL_UPDATE_STEPS // 3,
    )
    assert resolve_placeholders(fn, values)() == {
        "a": 25.0,
        "b": 25,
        "c": -3,
        "d": 10.0,
        "e": 13,
        "f": 13,
    }


def test_a_scheduler_stepped_on_a_metric_is_refused_before_the_first_step() -> None:
    """``ReduceLROnPlateau.step`` needs a metric, which a per-update ``step()`` cannot give:
    the run is refused when the scheduler is built, with a message naming the way to step
    it, instead of crashing inside the loop after the first update."""
    model = TinyMLP()
    trainer = make_trainer(model)
    before = [p.detach().clone() for p in model.parameters()]
    plateau = functools.partial(torch.optim.lr_scheduler.ReduceLROnPlateau, patience=1)
    with pytest.raises(TypeError, match=r"ReduceLROnPlateau.*'metrics'.*on_training_run_epoch_end"):
        trainer.train(
            blobs(n=16), num_epochs=2, per_device_batch_size=4, create_scheduler_fn=plateau
        )
    assert trainer.state.global_step == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_an_override_of_scheduler_step_may_pass_the_metric() -> None:
    """The way the refusal names: a ``scheduler_step`` override that passes the metric."""

    class PlateauTrainer(Trainer):
        def scheduler_step(self) -> None:
            assert self.scheduler is not None
            self.scheduler.step(1.0)  # type: ignore[call-arg]  # a constant: no improvement

    trainer = make_trainer(TinyMLP(), trainer_cls=PlateauTrainer)
    plateau = functools.partial(torch.optim.lr_scheduler.ReduceLROnPlateau, patience=0)
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4, create_scheduler_fn=plateau)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.1**3)


@pytest.mark.parametrize(("epochs", "n", "steps"), [(1.1, 50, 55), (0.14, 50, 7), (2.2, 45, 99)])
def test_warmup_epochs_are_counted_exactly(epochs: float, n: int, steps: int) -> None:
    # 1.1 x 50 in floats is 55.00000000000001, whose ceiling gave one update too many
    trainer = make_trainer(TinyMLP())
    fn = CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=epochs)
    trainer.train(blobs(n=n), num_epochs=3, per_device_batch_size=1, create_scheduler_fn=fn)
    assert trainer.scheduler.warmup_steps == steps


def test_a_group_added_mid_run_is_scheduled_from_its_first_update() -> None:
    # layers unfrozen inside the warm-up: their first update ran at the raw rate (0.1 where
    # the schedule said 0.05), a spike the warm-up is there to prevent
    torch.manual_seed(0)
    head, body = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    model = torch.nn.ModuleDict({"head": head, "body": body})
    body.requires_grad_(False)
    seen: list[list[float]] = []

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.parts = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return head(x) + body(x)

    class Unfreeze(schedulers_callbacks.TrainerCallback):
        def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
            if trainer.state.epoch == 1:
                body.requires_grad_(True)
                trainer.optimizer.add_param_group({"params": list(body.parameters()), "lr": 0.1})

    class Recording(Trainer):
        def optimizer_step(self) -> None:
            seen.append([g["lr"] for g in self.optimizer.param_groups])
            super().optimizer_step()

    trainer = Recording(Net(), torch.nn.MSELoss(), torch.optim.SGD(head.parameters(), lr=0.1),
                        callbacks=[Unfreeze()])  # fmt: skip
    data = torch.utils.data.TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
    fn = CosineWarmupScheduler.create_scheduler_fn(num_warmup_epochs=2)
    trainer.train(data, num_epochs=4, per_device_batch_size=4, create_scheduler_fn=fn)
    assert seen[4] == pytest.approx([0.05, 0.05])  # update 4 of an 8-update warm-up from 0
    assert all(len(lrs) == 2 and lrs[0] == pytest.approx(lrs[1]) for lrs in seen[4:])
