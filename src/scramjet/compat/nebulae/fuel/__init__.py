"""nebulae's Fuel names (FuelGenerator, Tank, Comburant) over :mod:`scramjet.data`.

- :class:`FuelGenerator` calls :func:`scramjet.data.pack`. ``generate(dst_path)`` writes
  one HDF5 file for a ``.hdf5``/``.h5`` path, one npz file for a ``.npz`` path (nebulae's
  "hdf5/npz file"), and a pack directory for any other path; all hold the pack layout.
- :class:`Tank` is a :class:`scramjet.data.PackedDataset` behind a torch ``DataLoader``,
  with nebulae's ``next()``, ``MPE`` and ``len()``.
- :class:`Comburant` is a :class:`scramjet.data.augment.Compose`; seeded, it draws per
  sample inside a Tank's ``prep_fn`` (the same with any number of workers).
- ``depot`` and ``farm``: the submodules nebulae's examples import
  (``from scramjet.compat.nebulae.fuel import depot``; ``depot.Tank``).
"""

from __future__ import annotations

from scramjet.compat.nebulae.fuel import depot, farm
from scramjet.compat.nebulae.fuel.comburant import (
    Blur,
    Brighten,
    Comburant,
    Contrast,
    Crop,
    Flip,
    Hue,
    Noise,
    Resize,
    Rotate,
    Sample,
    Saturate,
)
from scramjet.compat.nebulae.fuel.generator import FuelGenerator
from scramjet.compat.nebulae.fuel.tank import Tank

__all__ = [
    "Blur",
    "Brighten",
    "Comburant",
    "Contrast",
    "Crop",
    "Flip",
    "FuelGenerator",
    "Hue",
    "Noise",
    "Resize",
    "Rotate",
    "Sample",
    "Saturate",
    "Tank",
    "depot",
    "farm",
]
