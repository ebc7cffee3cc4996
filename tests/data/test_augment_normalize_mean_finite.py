"""Normalize's mean must be finite numbers, as its std must: a nan or infinite mean made
every output pixel nan or infinite without an error."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from scramjet.data.augment import Normalize


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_mean_that_is_not_finite_is_refused_when_made(bad: float) -> None:
    with pytest.raises(ValueError, match=r"mean values must be finite.*received \[0\.5, "):
        Normalize([0.5, bad, 0.5], [0.2, 0.2, 0.2])


def test_finite_mean_matches_a_torch_reference() -> None:
    img = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    ref = (torch.from_numpy(img).float() / 255 - torch.tensor(mean)) / torch.tensor(std)
    out = Normalize(mean, std)(img)
    assert out.dtype == np.float32 and np.isfinite(out).all()
    torch.testing.assert_close(torch.from_numpy(out), ref, rtol=0, atol=1e-6)
