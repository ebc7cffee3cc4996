"""nebulae's Astro names over plain PyTorch; they live in :mod:`.dock`.

- :class:`Craft`: an ``nn.Module`` whose forward is ``run()`` and which has a ``scope``.
- :class:`Rudder`, :class:`Prober`, :class:`Nozzle`: gradient contexts.
- :func:`coat`, :func:`shell`: values onto and off the current device.
- :func:`autoPad`: "same" padding in ``torch.nn.functional.pad`` order.
- ``dock``: the submodule nebulae's examples import
  (``from scramjet.compat.nebulae.astro import dock``; ``dock.Craft``).
"""

from __future__ import annotations

from scramjet.compat.nebulae.astro import dock
from scramjet.compat.nebulae.astro.dock import (
    Craft,
    Dense,
    Law,
    Nozzle,
    Prober,
    Reshape,
    Rudder,
    autoPad,
    coat,
    shell,
)

__all__ = [
    "Craft",
    "Dense",
    "Law",
    "Nozzle",
    "Prober",
    "Reshape",
    "Rudder",
    "autoPad",
    "coat",
    "dock",
    "shell",
]
