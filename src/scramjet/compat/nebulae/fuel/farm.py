"""``nebulae.fuel.farm``: the same names as ``depot`` (nebulae's distributed example imports it).

``from scramjet.compat.nebulae.fuel import farm`` then ``farm.Tank(...)``, as in
nebulae's Multiverse example.
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
]
