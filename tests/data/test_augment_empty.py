"""Augmentations given an image without pixels."""

from __future__ import annotations

import numpy as np
import pytest

from scramjet.data import augment as A

OPS = [
    A.Flip(p=1.0),
    A.Crop(area=(0.5, 0.6)),
    A.Crop(size=4),
    A.Rotate(20),
    A.Brighten((1.5, 1.5)),
    A.Blur(1.0, p=1.0),
    A.Noise(0.1),
    A.Resize(8),
    A.Normalize([0.5], [0.5]),
]


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
@pytest.mark.parametrize("shape", [(0, 4, 3), (4, 0, 3), (2, 0, 4, 3)])
def test_an_image_without_pixels_is_a_clear_error(op, shape):
    # Crop and Rotate raised ZeroDivisionError, Blur and Resize torch's internal errors
    with pytest.raises(ValueError, match=r"received shape .*no pixels"):
        op(np.zeros(shape, np.uint8), index=0)
