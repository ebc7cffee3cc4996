"""Checks of the plain values a checkpoint records beside its state: its metrics (names
as strings, values as floats) and its step and epoch counts."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["check_count", "clean_metrics", "short"]


def short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def clean_metrics(metrics: Mapping[str, Any] | None) -> dict[str, float]:
    """``metrics`` as ``{str(name): float(value)}``; two names that read the same as
    strings (``1`` and ``"1"``) are refused rather than one value silently kept."""
    out: dict[str, float] = {}
    names: dict[str, Any] = {}
    for name, value in (metrics or {}).items():
        if str(name) in names:
            raise ValueError(
                f"metrics {names[str(name)]!r} and {name!r} have the same name once stored "
                f"as a string ({str(name)!r}), so one value would be lost; rename one of "
                "them (metric names are best passed as distinct strings)"
            )
        names[str(name)] = name
        # one-element arrays too: float() of a 0-d bool array reads 1.0, and of a 1-d one
        # is deprecated in numpy
        if (isinstance(value, torch.Tensor) and value.numel() == 1) or (
            isinstance(value, np.ndarray) and value.size == 1
        ):
            value = value.item()
        try:
            # float("0.5") would parse a string; a bool would be stored as 1.0 or 0.0
            if isinstance(value, str | bytes | bool | np.bool_):
                raise TypeError
            out[str(name)] = float(value)
        except (TypeError, ValueError, OverflowError):
            raise TypeError(
                f"metric {name!r} must be a number (or a one-element tensor), got "
                f"{type(value).__qualname__}: {short(value)}; pass e.g. float(value)"
            ) from None
    return out


def check_count(value: Any, what: str, *, optional: bool = False) -> int:
    """``value`` (``step``; ``epoch`` with ``optional``: None is checked by the caller) as
    a plain non-negative int: numpy integers and one-element integer tensors are accepted;
    anything else is refused at save time, because a file holding it would not read back
    (or, negative, would be listed and resumed from as no run counts)."""
    number: int | None = None
    if not isinstance(value, bool | np.bool_ | float | str | bytes):
        try:
            number = operator.index(value)
        except TypeError:
            number = None
    if number is None or number < 0:
        expected = ("a non-negative int" if number is not None or not optional else "an int") + (
            " or None" if optional else ""
        )
        fix = f"{what}s count from 0" if number is not None else f"pass e.g. {what}=int(...)"
        raise ValueError(
            f"{what} must be {expected}, got {type(value).__qualname__}: {short(value)}; {fix}"
        )
    return number
