"""Signed integer images (int8, int16, int32) are augmented over their dtype's whole range,
torch.iinfo(dtype).min to .max, as uint8 images are over 0..255: black is the lowest value,
Noise's std and Normalize's scaling are fractions of ``max - min``, and an int8 image gives
what the same picture as uint8 (shifted by 128) gives."""

from __future__ import annotations

import pytest
import torch

from scramjet.data.augment import Brighten, Noise, Normalize, Rotate

SIGNED = [torch.int8, torch.int16, torch.int32]


def _picture(dtype: torch.dtype) -> torch.Tensor:
    """A 3x8x8 image spanning the dtype's range, from its min (black) to its max."""
    info = torch.iinfo(dtype)
    frac = torch.linspace(0.0, 1.0, 3 * 8 * 8, dtype=torch.float64).view(3, 8, 8)
    return (info.min + frac * (float(info.max) - float(info.min))).round().to(dtype)


@pytest.mark.parametrize("dtype", SIGNED)
def test_normalize_maps_the_dtype_range_onto_0_to_1(dtype: torch.dtype) -> None:
    info = torch.iinfo(dtype)
    img = torch.tensor([info.min, 0, info.max], dtype=dtype).view(1, 1, 3)
    out = Normalize([0.0], [1.0])(img)
    low = float(info.min)
    want = torch.tensor([0.0, -low / (info.max - low), 1.0]).view(1, 1, 3)
    torch.testing.assert_close(out, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", SIGNED)
def test_noise_std_is_a_fraction_of_the_dtype_range(dtype: torch.dtype) -> None:
    img = torch.zeros(1, 64, 64, dtype=dtype)
    out = Noise(std=(0.01, 0.01), seed=0)(img, index=0)
    info = torch.iinfo(dtype)
    spread = out.double().std().item() / (float(info.max) - float(info.min))
    assert 0.008 < spread < 0.012, spread


@pytest.mark.parametrize("dtype", SIGNED)
def test_darkening_moves_towards_the_dtype_minimum(dtype: torch.dtype) -> None:
    img = _picture(dtype)
    out = Brighten(factor=(0.5, 0.5), seed=0)(img, index=0)
    info = torch.iinfo(dtype)
    assert out.dtype == dtype
    assert int(out.min()) == info.min  # black stays black
    want = (info.min + (img.double() - info.min) * 0.5).round()
    torch.testing.assert_close(out.double(), want, atol=1.0, rtol=0)


def test_an_int8_image_augments_as_the_same_uint8_picture_shifted() -> None:
    unsigned = torch.arange(0, 192, dtype=torch.int32).view(3, 8, 8).to(torch.uint8)
    signed = (unsigned.to(torch.int16) - 128).to(torch.int8)
    for aug in (Rotate(degrees=(30, 30), seed=0), Brighten(factor=(1.5, 1.5), seed=0)):
        a, b = aug(unsigned, index=0), aug(signed, index=0)
        torch.testing.assert_close(b.to(torch.int16) + 128, a.to(torch.int16), atol=1, rtol=0)
    a, b = Normalize([0.5], [0.25])(unsigned), Normalize([0.5], [0.25])(signed)
    torch.testing.assert_close(a, b)


def test_an_int32_image_keeps_every_value() -> None:
    img = torch.tensor([-(2**31), 5, 2**31 - 1], dtype=torch.int32).view(1, 1, 3)
    out = Brighten(factor=(1.0, 1.0), seed=0)(img, index=0)
    assert torch.equal(out, img)
