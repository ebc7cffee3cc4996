"""``nebulae.fuel.depot``: the Tank and the Comburant with its augmentations.

``from scramjet.compat.nebulae.fuel import depot`` then ``depot.Tank(...)``, as in
nebulae's Fuel examples.
"""

from __future__ import annotations

from scramjet.compat.nebulae.fuel.comburant import (
    Blur,
    Brighten,
    Comburant,
    Contrast,
    Crop,
    Flip,
    Hue,
    Noise,
    Normalize,
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
    "Normalize",
    "Resize",
    "Rotate",
    "Sample",
    "Saturate",
    "Tank",
]
