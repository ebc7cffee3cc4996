"""``map_location`` of a checkpoint read: what ``torch.load`` takes, checked before a file
is read, and whether the file can be memory-mapped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import torch

# What torch.load takes: a device, its name, {saved location: new location}, or a function
# of (storage, saved location).
MapLocation: TypeAlias = str | torch.device | dict[str, str] | Callable[[Any, str], Any] | None


def check_map_location(map_location: Any) -> None:
    """Refuse a ``map_location`` device this process cannot use (no CUDA, no such index)."""
    if not isinstance(map_location, str | torch.device):
        return  # a dict or a function: torch.load applies it
    try:
        device = torch.device(map_location)
        if device.type not in ("cpu", "meta"):
            torch.empty(0, device=device)
    except Exception as error:  # RuntimeError, or AssertionError without CUDA support
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(
            f"map_location={map_location!r} names a device this process cannot use "
            f"({reason}). Pass map_location='cpu' (the default): load_state_dict then copies "
            "the values onto each parameter's device, wherever the model is."
        ) from None


def maps_to_cpu(map_location: MapLocation) -> bool:
    """Whether every tensor is read onto the CPU as stored, so the file can be mapped.

    A dict or a function may send storages anywhere: those files are read, not mapped.
    """
    if map_location is None:
        return True
    if isinstance(map_location, str | torch.device):
        return torch.device(map_location).type == "cpu"
    return False
