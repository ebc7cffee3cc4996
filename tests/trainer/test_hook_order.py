"""Hooks and callback events run in the order of seed 004's loop pseudocode."""

from __future__ import annotations

import functools
from typing import Any

import torch
from tests.common.world import Recorder, TinyMLP, blobs, make_trainer

from scramjet import Trainer

HOOKS = (
    "create_train_dataloader",
    "create_eval_dataloader",
    "create_scheduler",
    "training_run_start",
    "training_run_end",
    "evaluation_run_start",
    "evaluation_run_end",
    "train_epoch_start",
    "calculate_train_batch_loss",
    "backward_step",
    "clip_gradients",
    "optimizer_step",
    "scheduler_step",
    "optimizer_zero_grad",
    "train_epoch_end",
    "eval_epoch_start",
    "calculate_eval_batch_loss",
    "eval_epoch_end",
)


def _recording_trainer_class(log: list[str]) -> type[Trainer]:
    """A Trainer subclass overriding every hook to log its name, then run the default."""

    def make(name: str) -> Any:
        base = getattr(Trainer, name)

        def hook(self: Trainer, *args: Any, **kwargs: Any) -> Any:
            log.append(name)
            return base(self, *args, **kwargs)

        hook.__name__ = name
        return hook

    return type("RecordingTrainer", (Trainer,), {name: make(name) for name in HOOKS})


def _expected_train(n_epochs: int, n_train: int, n_eval: int) -> list[str]:
    """Seed 004's pseudocode, plus scramjet's clip/optimizer-step-end and evaluation-run events."""
    out = [
        "create_train_dataloader",
        "create_eval_dataloader",
        "create_scheduler",
        "training_run_start",
        "on_train_run_begin",
    ]
    for _ in range(n_epochs):
        out += ["train_epoch_start", "on_train_epoch_begin"]
        for _ in range(n_train):
            out += [
                "on_train_step_begin",
                "calculate_train_batch_loss",
                "on_train_step_end",
                "backward_step",
                "clip_gradients",
                "optimizer_step",
                "scheduler_step",
                "optimizer_zero_grad",
                "on_optimizer_step_end",
            ]
        out += ["train_epoch_end", "on_train_epoch_end"]
        out += _expected_eval(n_eval)
        out += ["on_training_run_epoch_end"]
    return [*out, "training_run_end", "on_train_run_end"]


def _expected_eval(n_eval: int) -> list[str]:
    out = [
        "evaluation_run_start",
        "on_evaluation_run_start",
        "eval_epoch_start",
        "on_eval_epoch_begin",
    ]
    for _ in range(n_eval):
        out += ["on_eval_step_begin", "calculate_eval_batch_loss", "on_eval_step_end"]
    return [
        *out,
        "eval_epoch_end",
        "on_eval_epoch_end",
        "evaluation_run_end",
        "on_evaluation_run_end",
    ]


def test_train_with_eval_follows_pseudocode() -> None:
    log: list[str] = []
    trainer = make_trainer(
        TinyMLP(), callbacks=[Recorder(log)], trainer_cls=_recording_trainer_class(log)
    )
    assert log == ["on_init_end"]
    log.clear()
    trainer.train(
        blobs(n=12),
        num_epochs=2,
        eval_dataset=blobs(n=6, seed=1),
        per_device_batch_size=4,
        create_scheduler_fn=functools.partial(torch.optim.lr_scheduler.StepLR, step_size=1),
    )
    assert log == _expected_train(n_epochs=2, n_train=3, n_eval=2)


def test_evaluate_follows_pseudocode() -> None:
    log: list[str] = []
    trainer = make_trainer(
        TinyMLP(), callbacks=[Recorder(log)], trainer_cls=_recording_trainer_class(log)
    )
    log.clear()
    trainer.evaluate(blobs(n=10), per_device_batch_size=4)
    assert log == ["create_eval_dataloader", *_expected_eval(n_eval=3)]


def test_accumulation_updates_only_at_window_ends() -> None:
    """With accumulation, the update hooks run at the end of each window (last one shorter)."""
    log: list[str] = []
    trainer = make_trainer(
        TinyMLP(), callbacks=[Recorder(log)], trainer_cls=_recording_trainer_class(log)
    )
    trainer.train(blobs(n=20), num_epochs=1, per_device_batch_size=4, gradient_accumulation_steps=2)
    steps = [e for e in log if e in ("calculate_train_batch_loss", "optimizer_step")]
    assert steps == ["calculate_train_batch_loss"] * 2 + ["optimizer_step"] + (
        ["calculate_train_batch_loss"] * 2 + ["optimizer_step"]
    ) + ["calculate_train_batch_loss", "optimizer_step"]
    assert log.count("on_optimizer_step_end") == trainer.state.global_step == 3
