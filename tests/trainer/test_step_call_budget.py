"""The Trainer's per-step Python work stays within a budget over a hand-written loop.

Timings on a shared machine vary by a few percent, as much as the overhead itself, so a
drift went unnoticed: the NaN guard's per-step check on the CPU (four tensor ops and an
environment read a step) took the Trainer from 1.03× to 1.08× a hand-written loop per
step (``benchmarks/trainer_overhead.py``) while the docs still said 1.02×. Function calls
per step are deterministic: this counts them (Python and builtins, as
``scripts/step_files.py`` does) for the Trainer with its default callbacks and for the
plain loop it replaces, over the same steady-state steps, with the same torch. The loop
made 364 calls per step and the Trainer 29 more; with that check, 61 more.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from scramjet import Trainer, TrainerCallback
from scramjet.callbacks import DEFAULT_CALLBACKS, ProgressBarCallback

WARMUP, TRACED = 5, 10
BUDGET = 45  # extra calls per step allowed over the plain loop (29 measured)


class _Calls:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            self.count += 1


def _model_and_data() -> tuple[torch.nn.Module, TensorDataset]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return model, TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))


def _trainer_calls() -> float:
    model, data = _model_and_data()
    calls = _Calls()

    class Tracer(TrainerCallback):
        def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
            if trainer.state.global_step == WARMUP:
                sys.setprofile(calls)
            elif trainer.state.global_step == WARMUP + TRACED:
                sys.setprofile(None)

    callbacks = [
        ProgressBarCallback(file=io.StringIO()) if cb is ProgressBarCallback else cb
        for cb in DEFAULT_CALLBACKS
    ]
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[*callbacks, Tracer()],
        device="cpu",
    )
    try:
        trainer.train(data, num_epochs=1, per_device_batch_size=16)
    finally:
        sys.setprofile(None)
    assert trainer.state.global_step == 16
    return calls.count / TRACED


def _loop_calls() -> float:
    model, data = _model_and_data()
    calls = _Calls()
    loss_fn = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    try:
        for step, (x, y) in enumerate(DataLoader(data, batch_size=16, shuffle=True), 1):
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(y)  # the epoch loss such loops report
            if step == WARMUP:
                sys.setprofile(calls)
            elif step == WARMUP + TRACED:
                sys.setprofile(None)
    finally:
        sys.setprofile(None)
    assert total > 0
    return calls.count / TRACED


def test_a_trainer_step_makes_at_most_a_budget_of_calls_more_than_a_plain_loop() -> None:
    loop, trainer = _loop_calls(), _trainer_calls()
    assert loop > 100, loop  # the tracing saw the loop's steps
    extra = trainer - loop
    assert extra <= BUDGET, (
        f"a Trainer step makes {trainer:.0f} calls, {extra:.0f} more than the plain loop's "
        f"{loop:.0f} (budget {BUDGET}): find the new per-step work with "
        "scripts/step_files.py, and measure it with benchmarks/trainer_overhead.py"
    )
