"""A call's index and epoch are checked on every call, as documented: an augmentation
without a seed (or given rng=) took index=-1, index=1.5 or epoch=None silently, and the
same code failed only once a seed was added."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scramjet.data.augment import Compose, Crop, Flip

IMG = np.zeros((6, 6, 3), np.uint8)


@pytest.mark.parametrize("seed", [None, 3])
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"index": -1}, "index"),
        ({"index": 1.5}, "index"),
        ({"index": "0"}, "index"),
        ({"index": 0, "epoch": None}, "epoch"),
        ({"index": 0, "epoch": -2}, "epoch"),
        ({"epoch": 0.5}, "epoch"),
    ],
)
def test_a_bad_index_or_epoch_is_refused_with_or_without_seed(
    seed: int | None, kwargs: dict[str, Any], name: str
) -> None:
    for aug in (Crop(seed=seed), Compose(Flip(), Crop(), seed=seed)):
        with pytest.raises(ValueError, match=rf"{name} must be an int >= 0.*received"):
            aug(IMG, **kwargs)


def test_a_bad_index_is_refused_with_an_explicit_generator() -> None:
    with pytest.raises(ValueError, match=r"index must be an int >= 0"):
        Crop()(IMG, rng=np.random.default_rng(0), index=-3)


def test_valid_index_and_epoch_still_draw_per_sample() -> None:
    aug = Compose(Flip(), Crop(area=(0.2, 0.6)), seed=1)
    img = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    a = aug(img, index=np.int64(4), epoch=2)
    np.testing.assert_array_equal(a, aug(img, index=4, epoch=2))
    assert Crop()(img, index=0, epoch=0).shape == img.shape
