"""Mixed precision through ``torch.amp``: choosing the mode, autocast, and loss scaling."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

PRECISIONS = ("no", "bf16", "fp16")
_ALIASES = {
    "fp32": "no",
    "float32": "no",
    "32": "no",
    "none": "no",
    "bfloat16": "bf16",
    "float16": "fp16",
    "16": "fp16",
}


def resolve_precision(value: str | None) -> str:
    """Return ``"no"``, ``"bf16"`` or ``"fp16"``.

    ``None`` means: use ``ACCELERATE_MIXED_PRECISION`` when the script was started by
    ``accelerate launch`` (it sets that variable), else full precision.

    Raises:
        ValueError: an unknown precision string; the message lists the valid ones.
    """
    source = None
    if value is None:
        source = _ENV
        value = os.environ.get(_ENV, "no")
    if not isinstance(value, str):
        raise TypeError(
            f"precision must be a string such as 'bf16'; received {type(value).__name__} {value!r}."
        )
    key = _ALIASES.get(value.strip().lower(), value.strip().lower())
    if key not in PRECISIONS:
        where = (
            f" (read from the environment variable {_ENV}, which `accelerate launch "
            f"--mixed_precision` sets, since no precision was passed)"
            if source
            else ""
        )
        raise ValueError(
            f"Unknown precision {value!r}{where}. Expected one of "
            f"{', '.join(map(repr, PRECISIONS))}: pass one, e.g. Trainer(..., precision='bf16')"
            f"{f', or set {_ENV} to one of them' if source else ''}."
        )
    return key


_ENV = "ACCELERATE_MIXED_PRECISION"


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype for a resolved precision (None for full precision)."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


def autocast_context(precision: str, device_type: str) -> contextlib.AbstractContextManager[Any]:
    """A context manager running the forward pass in the requested precision."""
    dtype = autocast_dtype(precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=dtype)


class _GradScaler(torch.amp.GradScaler):
    """torch's GradScaler, whose refusal of float16 gradients says what to change."""

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        try:
            super().unscale_(optimizer)
        except ValueError as error:
            if "FP16 gradients" not in str(error):
                raise
            held = sum(
                p.grad is not None and p.grad.dtype == torch.float16
                for g in optimizer.param_groups
                for p in g["params"]
            )
            raise ValueError(
                f"precision='fp16' scales the loss with a GradScaler, which needs float32 "
                f"weights; the optimizer holds {held or 'some'} parameter(s) whose gradients are "
                f"torch.float16 (a model converted with .half() or "
                f".to(torch.float16)). Keep the weights in float32: autocast runs the forward "
                f"in float16 by itself. Call model.float() before creating the optimizer, or "
                f"train a half-precision model with precision='no' (no loss scaling)."
            ) from error


def make_grad_scaler(precision: str, device_type: str) -> torch.amp.GradScaler | None:
    """A GradScaler for fp16 (its small range needs loss scaling); None otherwise."""
    if precision != "fp16":
        return None
    return _GradScaler(device_type)
