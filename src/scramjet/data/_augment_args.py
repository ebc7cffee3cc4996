"""Argument checks of the augmentations: each returns the value in its held form, or
raises a ``ValueError`` that names what was received and what to pass."""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def pair(value: Any, name: str) -> tuple[float, float]:
    """``value`` as a ``(low, high)`` pair of finite numbers; anything else is an error
    saying what to pass."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = tuple(value.tolist())
    ok = (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and len(value) == 2
        and all(is_number(v) for v in value)
    )
    if not ok:
        raise ValueError(
            f"{name} must be a (low, high) pair of numbers such as (0.5, 1.0); received "
            f"{value!r}. For a fixed value pass it twice, as (v, v)"
        )
    low, high = float(value[0]), float(value[1])
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{name} must be finite numbers; received {value!r}")
    return low, high


def finite(value: Any, name: str) -> Any:
    """``value`` itself; a single number that is nan or infinite is an error."""
    if is_number(value) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite numbers; received {value!r}")
    return value


def probability(p: Any) -> float:
    if not is_number(p) or not 0.0 <= p <= 1.0:  # nan fails the comparison
        raise ValueError(
            f"p must be a probability, a number in [0, 1]; received {p!r}. "
            "Pass e.g. p=0.5 (half the calls), or p=1.0 (every call)"
        )
    return float(p)


def rng_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
        raise ValueError(
            f"seed must be an int >= 0 or None (fresh randomness every call); received "
            f"{seed!r}. Pass e.g. seed=0"
        )
    return int(seed)


def count(value: Any, name: str) -> int:
    """A sample index or an epoch: an int >= 0 (numpy ints and 0-d integer tensors too)."""
    try:
        number = operator.index(value)
    except TypeError:
        number = -1
    if isinstance(value, bool) or number < 0:
        raise ValueError(
            f"{name} must be an int >= 0 (the sample's position in its dataset, and the "
            f"epoch counted from 0); received {value!r}. A negative position counts from "
            "the end of the dataset: pass index % len(dataset)"
        )
    return number


def out_size(size: Any) -> tuple[int, int]:
    """An output size, ``n`` or ``(height, width)``, as a pair of positive ints."""
    hw = (size, size) if isinstance(size, int | np.integer) else size
    ok = (
        isinstance(hw, Sequence)
        and not isinstance(hw, (str, bytes))
        and len(hw) == 2
        and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in hw)
        and all(v >= 1 for v in hw)
    )
    if not ok:
        raise ValueError(
            f"size must be a positive int or a (height, width) pair of positive ints; "
            f"received {size!r}. Pass e.g. size=224 or size=(224, 160)"
        )
    return int(hw[0]), int(hw[1])


def nonnegative(low_high: tuple[float, float], value: Any, name: str) -> tuple[float, float]:
    """A range of sigmas or standard deviations: both ends must be >= 0."""
    if low_high[0] < 0:
        raise ValueError(
            f"{name} must be >= 0 (a number, or a (low, high) pair with 0 <= low <= high); "
            f"received {value!r}"
        )
    return low_high


def span(value: Any, center: float, name: str) -> tuple[float, float]:
    """One number ``d`` as ``(center - d, center + d)``, or a ``(low, high)`` pair."""
    if is_number(value):
        d = float(value)
        if not math.isfinite(d):
            raise ValueError(f"{name} must be finite numbers; received {value!r}")
        if d < 0:
            means = "(-d, d)" if center == 0 else f"({center:g} - d, {center:g} + d)"
            raise ValueError(
                f"{name} must be a number >= 0 or a (low, high) pair; received {value!r}. "
                f"One number d means {means}: pass {-d:g}, or a pair such as "
                f"({center - abs(d):g}, {center:g})"
            )
        return center - d, center + d
    low, high = pair(value, name)
    if low > high:
        raise ValueError(f"{name} range must be (low, high) with low <= high; received {value!r}")
    return low, high


def flag(value: Any, name: str, hint: str = "") -> bool:
    """An on/off argument: a bool (numpy's too); a number or a string is an error, not
    read as "on" because it is truthy."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False; received {value!r}{hint}")
    return bool(value)
