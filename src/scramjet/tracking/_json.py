"""Strict JSON for the run folder's files: what ``jq``, JavaScript's ``JSON.parse`` and
other strict parsers read. JSON has no NaN or infinity, so a non-finite float is written
as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (as the checkpoint index does),
and :func:`loads` gives such a string back as the float (the bare ``NaN``/``Infinity``
tokens of files written before are read too). Free of torch: ``scramjet report`` uses it."""

from __future__ import annotations

import json
import math
from typing import Any

#: The string each non-finite float is written as, and back.
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def strict(value: Any) -> Any:
    """``value`` with every non-finite float (in dicts, lists and tuples) as its name."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps`` of :func:`strict` ``(value)``; a non-finite float left anywhere (a
    type ``default`` turns into one) fails here, never in a reader."""
    return json.dumps(strict(value), allow_nan=False, **options)


def numbers(value: Any) -> Any:
    """``value`` read from JSON, with the strings of :data:`NON_FINITE` as their floats."""
    if isinstance(value, str):
        return NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {k: numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers(v) for v in value]
    return value


def loads(text: str) -> Any:
    """The JSON in ``text``, non-finite numbers as floats (see :func:`numbers`)."""
    return numbers(json.loads(text))


__all__ = ["NON_FINITE", "dumps", "loads", "numbers", "strict"]
