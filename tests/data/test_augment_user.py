"""Augmentations as a vision user meets them: odd inputs, ranges, parameters, errors."""

from __future__ import annotations

import numpy as np
import pytest

from scramjet.data import augment as A


def image(seed: int = 0, h: int = 12, w: int = 16, c: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, c), dtype=np.uint8)


# -- RGBA and gray + alpha ------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [A.Brighten((1.4, 1.4)), A.Contrast((0.5, 0.5)), A.Saturate((0.3, 0.3)), A.Hue((0.3, 0.3))],
)
def test_colour_augmentations_change_rgba_colours_and_keep_alpha(op):
    rgba = image(c=4)
    out = op(rgba)
    assert out.shape == rgba.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(out[..., 3], rgba[..., 3])
    np.testing.assert_array_equal(out[..., :3], op(np.ascontiguousarray(rgba[..., :3])))


@pytest.mark.parametrize("op", [A.Brighten((1.4, 1.4)), A.Contrast((0.5, 0.5))])
def test_colour_augmentations_keep_the_alpha_of_gray_alpha_images(op):
    la = image(c=2)
    out = op(la)
    np.testing.assert_array_equal(out[..., 1], la[..., 1])
    np.testing.assert_array_equal(out[..., :1], op(np.ascontiguousarray(la[..., :1])))


def test_saturate_on_five_channels_says_what_it_takes():
    with pytest.raises(
        ValueError, match=r"1 \(gray\).*4 \(RGBA\).*received 5 channels.*x\[..., :3\]"
    ):
        A.Saturate(0.5)(image(c=5))
