"""The values given to the Dashboard: its ``format`` checked, and entries read as numbers.

Pure helpers of :class:`~scramjet.dashboard.Dashboard`: ``gauge()`` checks its counters with
:func:`integral`, keeps tensors as given (:func:`detach`), and the display thread reads
them, one copy per device, with :func:`as_numbers`.
"""

from __future__ import annotations

import math
import numbers
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import torch

FORMAT_KINDS = ("raw", "percent", "tailor", "inviz")


def check_format(fmt: Mapping[str, Any] | None) -> dict[str, tuple[str, Any]]:
    """``format=`` as ``{metric: (kind, arg)}``; an unknown kind, a ``tailor`` without a
    function or a spec that formats no number is refused, naming the metric."""
    example = "{'acc': ('percent', '.2f'), 'loss': ('raw', '.4f')}"
    if fmt is not None and not isinstance(fmt, Mapping):
        raise TypeError(
            f"format must be a dict {{metric: (kind, arg)}}; received {fmt!r} "
            f"({type(fmt).__name__}), e.g. {example}."
        )
    out: dict[str, tuple[str, Any]] = {}
    for name, spec in (fmt or {}).items():
        pair = (spec,) if isinstance(spec, str) else spec
        kind, arg = (*pair, None)[:2] if isinstance(pair, tuple | list) else (spec, None)
        if kind not in FORMAT_KINDS:
            raise ValueError(
                f"format[{name!r}] = {spec!r}: expected a kind or a pair (kind, arg); the "
                f"kind must be one of {FORMAT_KINDS}, e.g. {example}."
            )
        if kind == "tailor" and not callable(arg):
            raise TypeError(
                f"format[{name!r}] uses 'tailor', which needs a function value -> str as its "
                f"second item; received {arg!r}."
            )
        if kind in ("raw", "percent") and arg is not None:
            try:
                format(0.5, arg)
            except (TypeError, ValueError):
                raise ValueError(
                    f"format[{name!r}] = {spec!r}: {arg!r} is not a format() spec for a "
                    f"number; use one such as '.4f', '.2e' or '.3g', e.g. "
                    f"{{{str(name)!r}: ({kind!r}, '.4f')}}."
                ) from None
        out[str(name)] = (kind, arg)
    return out


def as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        return math.nan


def as_numbers(values: Sequence[Any]) -> list[float]:
    """``values`` as floats (NaN for what is not one number); the one-element tensors
    among them are copied to the host together, one copy per device, not one each."""
    out = [math.nan] * len(values)
    by_device: dict[torch.device, list[int]] = {}
    for i, value in enumerate(values):
        if isinstance(value, torch.Tensor):
            if value.numel() == 1 and not value.is_complex():
                by_device.setdefault(value.device, []).append(i)
        else:
            out[i] = as_float(value)
    for indices in by_device.values():
        try:
            # float64: a float64 or int64 value keeps its digits (float32 made 1e300 inf)
            stacked = torch.stack([values[i].detach().reshape(()).double() for i in indices])
            numbers: list[float] = stacked.tolist()
        except (RuntimeError, TypeError, ValueError):  # the display never stops the loop
            numbers = [as_float(values[i]) for i in indices]
        for i, number in zip(indices, numbers):
            out[i] = float(number)
    return out


def integral(value: Any) -> bool:
    """An int, NumPy integer or other integral number, but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_stage(stage: Any) -> str:
    """``stage`` as given to ``gauge()``: text, not blank, without control characters
    (it names a row, a plain line and the CSV's ``stage`` column).

    Raises:
        TypeError: ``stage`` is not a ``str``.
        ValueError: it is empty, only spaces, or holds a control character.
    """
    if not isinstance(stage, str):
        raise TypeError(
            f"gauge(): stage must be a str such as 'train' or 'test'; received "
            f"{stage!r} ({type(stage).__name__}). Pass the stage's name as text."
        )
    if not _visible(stage):
        raise ValueError(
            f"gauge(): stage {stage!r} is blank or holds a control character (a newline, "
            f"tab or escape code); it names a row of the display and the 'stage' column "
            f"of the CSV files. Pass a visible name such as 'train' or 'test'."
        )
    return stage


def _visible(text: str) -> bool:
    """Not blank, and no control character (a newline, tab or escape code)."""
    return bool(text.strip()) and not any(unicodedata.category(c) == "Cc" for c in text)


def detach(value: Any) -> Any:
    detach = getattr(value, "detach", None)
    return detach() if callable(detach) else value


def entry_values(entry: Mapping[str, Any], free: Collection[str] = ()) -> dict[str, Any]:
    """``gauge()``'s entry as it is kept: tensors detached (never synced here), one-element
    arrays as their number, text as it is. The metrics in ``free`` (a ``tailor`` function
    shows them, or ``inviz`` ones) are kept as given, whatever they hold.

    Raises:
        ValueError: a metric name is blank or holds a control character.
        TypeError: a value holds several numbers (a tensor, array, list or tuple); it
            would be drawn and logged as NaN.
    """
    kept = {}
    for name, value in entry.items():
        if not _visible(str(name)):
            raise ValueError(
                f"gauge(): metric name {str(name)!r} is blank or holds a control character "
                f"(a newline, tab or escape code); it is shown next to its value and names "
                f"its files. Pass a visible name such as 'loss'."
            )
        if str(name) in free:
            kept[str(name)] = detach(value)
            continue
        if isinstance(value, torch.Tensor | np.ndarray | np.generic):
            count, shape = int(np.prod(value.shape)), tuple(value.shape)
            if count == 1:
                kept[str(name)] = (
                    value.detach() if isinstance(value, torch.Tensor) else value.item()
                )
                continue
            what = f"a {type(value).__name__} of shape {shape}"
        elif isinstance(value, list | tuple | set | Mapping):
            count, what = len(value), f"a {type(value).__name__}"
        else:
            kept[str(name)] = detach(value)
            continue
        raise TypeError(
            f"gauge(): entry[{str(name)!r}] is {what}, {count} values; a metric takes one "
            f"number (a float, or a tensor or array of one element). Pass one, e.g. "
            f"{{{str(name)!r}: {name}.mean()}}, or give each value its own name "
            f"({{'{name}_0': ..., '{name}_1': ...}})."
        )
    return kept
