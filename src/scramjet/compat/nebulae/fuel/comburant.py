"""nebulae's ``Comburant`` and the augmentations it holds, from :mod:`scramjet.data.augment`."""

from __future__ import annotations

from scramjet.data.augment import (
    Augmentation,
    Blur,
    Brighten,
    Compose,
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

__all__ = [
    "Blur",
    "Brighten",
    "Comburant",
    "Contrast",
    "Crop",
    "Flip",
    "Hue",
    "Noise",
    "Normalize",
    "Resize",
    "Rotate",
    "Sample",
    "Saturate",
]


class Comburant(Compose):
    """A container of augmentations applied in order (nebulae's ``Comburant``).

    Example:
        >>> import numpy as np
        >>> comburant = Comburant(Flip(), Brighten(0.2), seed=0)
        >>> comburant(np.zeros((8, 8, 3), np.uint8)).shape
        (8, 8, 3)
    """

    def __init__(self, *augmentations: Augmentation, seed: int | None = None) -> None:
        super().__init__(*augmentations, seed=seed)
