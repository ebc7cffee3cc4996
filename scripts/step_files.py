"""Which source files of scramjet one steady-state training step runs code in, and how many
function calls a step makes.

Trains a small MLP with the default callbacks, lets a few steps pass (warm-up: loaders
built, callbacks started), then records with ``sys.setprofile`` every function called
during the next ``TRACED_STEPS`` optimizer steps and prints the scramjet files the Python
ones live in, and the calls per step (Python functions and builtins, everything the step
runs: DataLoader, collate, torch's Python layer, scramjet). The call count is a
deterministic measure of the per-step Python work, unlike a timing on a shared machine.

Usage: python scripts/step_files.py
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import TensorDataset

import scramjet
from scramjet import Trainer, TrainerCallback

PACKAGE_ROOT = Path(scramjet.__file__).resolve().parent
WARMUP_STEPS = 5
TRACED_STEPS = 10


class _StepTracer(TrainerCallback):
    """Starts the profiler after the warm-up steps and stops it one step later."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.tracing = False
        self.calls = 0

    def _record(self, frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            self.calls += 1
        if event == "call":
            path = Path(frame.f_code.co_filename).resolve()
            if path.is_relative_to(PACKAGE_ROOT):
                self.files.add(str(path.relative_to(PACKAGE_ROOT.parent)))

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        step = trainer.state.global_step
        if step == WARMUP_STEPS:
            self.tracing = True
            sys.setprofile(self._record)
        elif step == WARMUP_STEPS + TRACED_STEPS and self.tracing:
            sys.setprofile(None)
            self.tracing = False


def model_and_data() -> tuple[torch.nn.Module, TensorDataset]:
    """The small MLP and the 256 random samples every traced run trains on."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return model, TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))


def trace_trainer_steps(device: str | None = None) -> _StepTracer:
    """Train :func:`model_and_data` with ``DEFAULT_CALLBACKS`` (progress output to a
    buffer), batch 16, and return the tracer of its ``TRACED_STEPS`` steady-state steps."""
    from scramjet.callbacks import DEFAULT_CALLBACKS, ProgressBarCallback

    model, data = model_and_data()
    tracer = _StepTracer()
    callbacks: list[Any] = [
        ProgressBarCallback(file=io.StringIO()) if cb is ProgressBarCallback else cb
        for cb in DEFAULT_CALLBACKS
    ]
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[*callbacks, tracer],
        device=device,
    )
    try:
        trainer.train(data, num_epochs=1, per_device_batch_size=16)
    finally:
        sys.setprofile(None)
    return tracer


def main() -> None:
    tracer = trace_trainer_steps()
    files = sorted(f for f in tracer.files if not f.endswith("step_files.py"))
    print(f"{len(files)} files touched by a steady-state training step:")
    for name in files:
        print(f"  {name}")
    print(f"{tracer.calls / TRACED_STEPS:.0f} function calls per step (Python and builtins)")


if __name__ == "__main__":
    main()
