"""``RegressionResults`` given plain Python lists of floats keeps their float64 precision,
as scikit-learn does: converted to float32 first, targets around 2e6 lost their decimals
and the MSE was 3% off."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from scramjet.metrics import RegressionResults


@pytest.mark.parametrize("k", [None, 2])
def test_lists_of_large_floats_match_sklearn(k: int | None) -> None:
    rng = np.random.default_rng(0)
    shape = (50,) if k is None else (50, k)
    target = 2e6 + rng.normal(size=shape)
    pred = target + rng.normal(scale=0.3, size=shape)
    out = RegressionResults()(pred.tolist(), target.tolist())
    assert out["mse"] == pytest.approx(skm.mean_squared_error(target, pred), rel=1e-9)
    assert out["mae"] == pytest.approx(skm.mean_absolute_error(target, pred), rel=1e-9)
    assert out["r2"] == pytest.approx(skm.r2_score(target, pred), rel=1e-9)
