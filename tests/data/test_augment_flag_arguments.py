"""On/off arguments of the augmentations (Flip's directions, Sample's jitter) are bools:
a probability or a string passed in their place is refused, not read as "on"."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scramjet.data.augment import Flip, Sample


@pytest.mark.parametrize("value", [1.0, 0.0, 0.3, "yes", None, 2])
def test_flip_refuses_a_direction_that_is_not_a_bool(value: Any) -> None:
    # Flip(1.0), written as torchvision's RandomHorizontalFlip(p), flipped half the calls
    with pytest.raises(ValueError, match=r"horizontal must be True or False.*p="):
        Flip(value)
    with pytest.raises(ValueError, match=r"vertical must be True or False"):
        Flip(vertical=value)


def test_flip_probability_given_by_name_flips_every_call() -> None:
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    flip = Flip(p=1.0, horizontal=np.bool_(True))
    for _ in range(8):
        np.testing.assert_array_equal(flip(img), img[:, ::-1])
    assert flip.horizontal is True


@pytest.mark.parametrize("value", ["no", 0.5, None])
def test_sample_refuses_a_jitter_that_is_not_a_bool(value: Any) -> None:
    with pytest.raises(ValueError, match=r"jitter must be True or False"):
        Sample(2, jitter=value)
