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
    "Flip": "fuel",
    "Crop": "fuel",
    "Rotate": "fuel",
    "Brighten": "fuel",
    "Contrast": "fuel",
    "Saturate": "fuel",
    "Hue": "fuel",
    "Sample": "fuel",
    # aerolog: the dashboard
    "DashBoard": "aerolog",
    # cockpit: devices, checkpoints, processes
    "CPU": "cockpit",
    "GPU": "cockpit",
    "Engine": "cockpit",
    "TimeMachine": "cockpit",
    "Multiverse": "cockpit",
    # kit: GPU monitoring
    "GPUtil": "kit",
    # astro: networks, gradient contexts, tensor helpers
    "Craft": "astro",
    "Dense": "astro",
    "Law": "astro",
    "Reshape": "astro",
    "Rudder": "astro",
    "Prober": "astro",
    "Nozzle": "astro",
    "coat": "astro",
    "shell": "astro",
    "autoPad": "astro",
    "dock": "astro",
}

__all__ = sorted(_WHERE)


_SUBMODULES = frozenset({"fuel", "aerolog", "cockpit", "kit", "astro"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # `neb.cockpit.Engine` works without importing cockpit first
        return importlib.import_module(f"{__name__}.{name}")
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(
            f"module 'scramjet.compat.nebulae' has no attribute {name!r}"
        ) from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
