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

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.utils.data import DataLoader

BUDGET = 45  # extra calls per step allowed over the plain loop (29 measured)


def _step_files() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "scripts" / "step_files.py"
    spec = importlib.util.spec_from_file_location("step_files", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Calls:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            self.count += 1


def _loop_calls(steps: ModuleType) -> float:
    """Calls per step of the plain loop over the same model, data and steps as the script."""
    model, data = steps.model_and_data()
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
            if step == steps.WARMUP_STEPS:
                sys.setprofile(calls)
            elif step == steps.WARMUP_STEPS + steps.TRACED_STEPS:
                sys.setprofile(None)
    finally:
        sys.setprofile(None)
    assert total > 0
    return calls.count / steps.TRACED_STEPS


def test_a_trainer_step_makes_at_most_a_budget_of_calls_more_than_a_plain_loop() -> None:
    steps = _step_files()
    loop = _loop_calls(steps)
    trainer = steps.trace_trainer_steps(device="cpu").calls / steps.TRACED_STEPS
    assert loop > 100, loop  # the tracing saw the loop's steps
    extra = trainer - loop
    assert extra <= BUDGET, (
        f"a Trainer step makes {trainer:.0f} calls, {extra:.0f} more than the plain loop's "
        f"{loop:.0f} (budget {BUDGET}): find the new per-step work with "
        "scripts/step_files.py, and measure it with benchmarks/trainer_overhead.py"
    )
