"""Augmentations as a vision user meets them: odd inputs, ranges, parameters, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

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


# -- value ranges ---------------------------------------------------------------------------


def test_uint16_images_saturate_instead_of_wrapping_around():
    x = np.full((4, 4, 3), 60000, np.uint16)
    out = A.Brighten((1.5, 1.5))(x)
    assert out.dtype == np.uint16
    assert (out == 65535).all()  # wrapped to 24464 before


def test_signed_integer_tensors_saturate_at_their_dtype_limits():
    x = torch.full((3, 4, 4), 30000, dtype=torch.int16)
    assert (A.Brighten((1.5, 1.5))(x) == 32767).all()


def test_uint16_noise_and_normalize_use_the_16_bit_range():
    x = np.full((8, 8, 1), 32768, np.uint16)
    out = A.Normalize([0.0], [1.0])(x)
    np.testing.assert_allclose(out, 32768 / 65535, rtol=1e-6)
    noisy = A.Noise((0.05, 0.05), seed=0)(x, index=0).astype(float)
    assert 0.03 * 65535 < noisy.std() < 0.07 * 65535  # 0.05 levels before: no noise at all


@pytest.mark.parametrize(
    "op",
    [
        A.Brighten((1.5, 1.5)),
        A.Contrast((2.0, 2.0)),
        A.Saturate((3.0, 3.0)),
        A.Hue((0.3, 0.3)),
        A.Noise((0.3, 0.3)),
    ],
)
def test_float_images_in_unit_range_stay_in_unit_range(op):
    x = torch.rand(3, 16, 16, generator=torch.Generator().manual_seed(0))
    out = op(x, rng=np.random.default_rng(0))
    assert out.dtype == torch.float32
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    # the same as the uint8 path, which clips at 0 and 255
    u8 = op((x * 255).round().to(torch.uint8), rng=np.random.default_rng(0))
    if not isinstance(op, A.Noise):
        assert (out * 255 - u8.float()).abs().max() <= 3


def test_float_images_outside_unit_range_are_not_clipped():
    x = torch.linspace(-2, 2, 3 * 4 * 4).reshape(3, 4, 4)  # already normalized data
    torch.testing.assert_close(A.Brighten((1.5, 1.5))(x), x * 1.5)


def test_augmentations_after_normalize_are_not_clipped_to_unit_range():
    img = image()
    out = A.Compose(A.Normalize([0.5], [0.1]), A.Brighten((2.0, 2.0)))(img)
    np.testing.assert_allclose(out, (img / 255 - 0.5) / 0.1 * 2, atol=1e-4)
