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


def make_grad_scaler(precision: str, device_type: str) -> torch.amp.GradScaler | None:
    """A GradScaler for fp16 (its small range needs loss scaling); None otherwise."""
    if precision != "fp16":
        return None
    return torch.amp.GradScaler(device_type)
