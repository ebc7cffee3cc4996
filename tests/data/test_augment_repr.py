"""An augmentation's repr is the call that makes it: printed or logged, it reads true."""

from __future__ import annotations

import numpy as np
import pytest

from scramjet.data import augment as A

OPS = [
    A.Flip(p=0.3, vertical=True, seed=4),
    A.Crop(area=(0.4, 0.9), size=(6, 5), p=0.7, seed=1),
    A.Rotate(25, seed=2),
    A.Contrast((0.5, 0.9), p=0.6, seed=3),
    A.Blur(0.8, seed=5),
    A.Noise(0.1, seed=6),
    A.Resize((6, 5)),
    A.Normalize([0.5, 0.4, 0.3], [0.2]),
    A.Compose(A.Flip(p=0.2), A.Hue(0.2), seed=9),
]


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_repr_builds_the_same_augmentation(op):
    text = repr(op)
    again = eval(text, vars(A))  # Flip's said p=1.0 and prob=0.5; Resize's took no p or seed
    assert repr(again) == text
    img = np.random.default_rng(0).integers(0, 256, (9, 7, 3), dtype=np.uint8)
    for index in range(8):
        np.testing.assert_array_equal(again(img, index=index), op(img, index=index))


def test_flip_repr_shows_its_probability():
    assert "p=0.3" in repr(A.Flip(p=0.3)) and "p=1.0" not in repr(A.Flip(p=0.3))


def test_sample_repr_builds_the_same_augmentation():
    op = A.Sample(3, jitter=False, seed=1)
    assert eval(repr(op), vars(A)).__dict__ == op.__dict__
