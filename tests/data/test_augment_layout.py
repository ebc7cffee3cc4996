"""Augmentations given the other layout: an HWC tensor, a CHW array."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scramjet.data import augment as A

OPS = [
    A.Flip(p=1.0),
    A.Crop(area=(0.5, 0.6)),
    A.Rotate(20),
    A.Brighten((1.5, 1.5)),
    A.Blur(1.0, p=1.0),
    A.Resize(8),
    A.Normalize([0.5], [0.5]),
]


def red(h: int = 32, w: int = 32) -> np.ndarray:
    img = np.zeros((h, w, 3), np.uint8)
    img[..., 0] = 255
    return img


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_an_hwc_tensor_is_refused_not_augmented_along_its_colours(op):
    # torch.from_numpy(np.asarray(pil_image)) is H x W x C: Flip turned red into blue
    hwc = torch.from_numpy(red())
    with pytest.raises(ValueError, match=r"\(32, 32, 3\).*permute\(2, 0, 1\)"):
        op(hwc, index=0)


def test_a_thwc_video_tensor_is_refused():
    frames = torch.from_numpy(np.stack([red(), red()]))  # torchvision.io.read_video's layout
    with pytest.raises(ValueError, match=r"\(2, 32, 32, 3\).*permute\(0, 3, 1, 2\)"):
        A.Flip(p=1.0)(frames)


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_a_chw_array_is_refused(op):
    chw = np.ascontiguousarray(red().transpose(2, 0, 1))
    with pytest.raises(ValueError, match=r"\(3, 32, 32\).*transpose\(1, 2, 0\)"):
        op(chw, index=0)


@pytest.mark.parametrize(
    "x",
    [
        torch.zeros(3, 32, 32, dtype=torch.uint8),  # CHW tensor
        torch.zeros(2, 3, 32, 32),  # TCHW tensor
        np.zeros((32, 32, 3), np.uint8),  # HWC array
        np.zeros((4, 4, 3), np.uint8),  # a small image: 4 x 4 is both readings, taken as given
        np.zeros((3, 3, 3), np.uint8),
        torch.zeros(8, 16, 16),  # 8 channels (multispectral): any count stays accepted
        np.zeros((16, 16, 8), np.uint8),
    ],
    ids=lambda x: f"{type(x).__name__}{tuple(x.shape)}",
)
def test_images_in_the_documented_layout_are_still_augmented(x):
    out = A.Flip(p=1.0)(x)
    assert tuple(out.shape) == tuple(x.shape)
