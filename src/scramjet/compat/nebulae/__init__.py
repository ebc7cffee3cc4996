"""nebulae's documented names over scramjet's core.

Names are resolved lazily from the submodules below, so importing this package costs
nothing until a name is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE: dict[str, str] = {
    # fuel: packing, reading, augmentation
    "FuelGenerator": "fuel",
    "Tank": "fuel",
    "Comburant": "fuel",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module 'scramjet.compat.nebulae' has no attribute {name!r}") from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
