"""How checkpoint payloads are built from live objects and turned back into values.

Everything stored goes through :func:`to_storable`, which only lets through types that
``torch.load(weights_only=True)`` reads back (numpy arrays become tagged tensors).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

FORMAT_VERSION = 1
MARKER = "scramjet_checkpoint"
_NDARRAY_TAG = "__scramjet_ndarray__"
_PRIMITIVES: tuple[type, ...] = (bool, int, float, complex, str, bytes)

__all__ = [
    "FORMAT_VERSION",
    "MARKER",
    "build_payload",
    "clean_metrics",
    "from_storable",
    "is_stateful",
    "to_storable",
    "unwrap",
]


def to_storable(value: Any, where: str) -> Any:
    """Convert ``value`` into types that ``torch.load(weights_only=True)`` accepts."""
    if value is None or type(value) in _PRIMITIVES:
        return value
    if isinstance(value, np.generic):  # before float: np.float64 subclasses float
        return value.item()
    for base in _PRIMITIVES:  # IntEnum, str subclasses, ...: store the plain value
        if isinstance(value, base):
            return base(value)
    if isinstance(value, torch.Tensor | torch.dtype | torch.device):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(
                f"{where}: numpy arrays of dtype=object cannot be stored safely; "
                "convert it to a numeric array or a list first"
            )
        return {_NDARRAY_TAG: torch.from_numpy(np.ascontiguousarray(value))}
    if isinstance(value, Mapping):
        return {k: to_storable(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [to_storable(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, list):
            return items
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(items)
        return items if hasattr(value, "_fields") else type(value)(items)
    raise TypeError(
        f"{where}: cannot store a value of type {type(value).__qualname__}. Expected an object "
        "with state_dict()/load_state_dict(), a tensor, a numpy array, a number, a string, "
        "or lists/tuples/dicts of these. Convert it (e.g. to a dict) before saving."
    )


def from_storable(value: Any, copy: bool = False) -> Any:
    """Undo :func:`to_storable`; ``copy`` clones tensors (to detach them from a mmap)."""
    if isinstance(value, torch.Tensor):
        return value.clone() if copy else value
    if isinstance(value, dict):
        if len(value) == 1 and _NDARRAY_TAG in value:
            return from_storable(value[_NDARRAY_TAG], copy).numpy()
        return {k: from_storable(v, copy) for k, v in value.items()}
    if isinstance(value, list):
        return [from_storable(v, copy) for v in value]
    if isinstance(value, tuple):
        return tuple(from_storable(v, copy) for v in value)
    return value


def unwrap(obj: Any) -> Any:
    """Strip DDP/DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``) wrappers."""
    while True:
        if isinstance(obj, nn.parallel.DistributedDataParallel | nn.DataParallel):
            obj = obj.module
        elif isinstance(obj, nn.Module) and isinstance(getattr(obj, "_orig_mod", None), nn.Module):
            obj = obj._orig_mod
        else:
            return obj


def is_stateful(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def clean_metrics(metrics: Mapping[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in (metrics or {}).items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        try:
            out[str(name)] = float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"metric {name!r} must be a number (or a one-element tensor), got "
                f"{type(value).__qualname__}: {value!r}"
            ) from None
    return out


def build_payload(
    state: Mapping[str, Any],
    *,
    seq: int,
    step: int,
    epoch: int | None,
    metrics: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The dict stored in a checkpoint file (objects with ``state_dict`` saved through it)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a dict of entries, got {type(state).__qualname__}")
    payload_state: dict[str, Any] = {}
    stateful: list[str] = []
    for key, value in state.items():
        if not isinstance(key, str):
            raise TypeError(f"state keys must be strings, got {key!r}")
        obj = unwrap(value)
        if is_stateful(obj):
            payload_state[key] = to_storable(obj.state_dict(), f"state[{key!r}].state_dict()")
            stateful.append(key)
        else:
            payload_state[key] = to_storable(value, f"state[{key!r}]")
    return {
        MARKER: FORMAT_VERSION,
        "seq": seq,
        "step": step,
        "epoch": epoch,
        "metrics": clean_metrics(metrics),
        "stateful": stateful,
        "state": payload_state,
    }
