"""Augmentations keep float64 images exact where the operation is exact (a flip, a crop
without resizing), and refuse an ``rng=`` that is not a numpy Generator with a clear
error; ``EpochSampler`` refuses a rank outside its replicas."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scramjet.data.augment import Brighten, Crop, Flip, Rotate
from scramjet.trainer.data_order import EpochSampler


def test_float64_images_are_worked_on_in_float64() -> None:
    x = torch.rand(3, 5, 7, dtype=torch.float64)
    out = Flip(p=1.0)(x)
    assert out.dtype == torch.float64 and torch.equal(out, x.flip(-1))
    a = np.random.default_rng(0).random((5, 7, 3))
    assert np.array_equal(Flip(p=1.0)(a), a[:, ::-1])
    # a crop of the whole image is the image itself
    assert np.array_equal(Crop(area=(1.0, 1.0), ratio=(7 / 5, 7 / 5))(a), a)
    assert np.abs(Rotate((0, 0))(a) - a).max() < 1e-12
    bright = Brighten(factor=(1.25, 1.25), p=1.0)(x)
    torch.testing.assert_close(bright, (x * 1.25).clamp(0, 1), rtol=0, atol=1e-15)


@pytest.mark.parametrize("rng", [5, np.random.RandomState(0)], ids=["int", "RandomState"])
@pytest.mark.parametrize("aug", [Flip(), Crop()], ids=["Flip", "Crop"])
def test_an_rng_that_is_not_a_generator_is_named(aug: object, rng: object) -> None:
    with pytest.raises(TypeError, match=r"rng must be a numpy Generator.*default_rng"):
        aug(np.zeros((8, 8, 3), np.uint8), rng=rng)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("replicas", "rank"),
    [(2, 2), (2, -1), (0, 0), (-1, 0)],
    ids=["past", "negative", "zero", "neg-w"],
)
def test_epoch_sampler_refuses_a_rank_outside_its_replicas(replicas: int, rank: int) -> None:
    with pytest.raises(ValueError, match=f"received rank={rank}, num_replicas={replicas}"):
        EpochSampler(list(range(10)), seed=0, num_replicas=replicas, rank=rank)
    with pytest.raises(TypeError, match="rank must be an int"):
        EpochSampler(list(range(10)), num_replicas=2, rank=1.0)  # type: ignore[arg-type]
    both = [list(EpochSampler(list(range(10)), seed=0, num_replicas=2, rank=r)) for r in (0, 1)]
    assert sorted(both[0] + both[1]) == list(range(10))
