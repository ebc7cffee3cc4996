"""R² of targets far from zero (timestamps, populations) against ``sklearn.metrics``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from scramjet.metrics import RegressionResults


@pytest.mark.parametrize("offset", [1e8, 1.7e9])
@pytest.mark.parametrize("outputs", [1, 3])
def test_r2_of_targets_far_from_zero_matches_sklearn(offset: float, outputs: int) -> None:
    # R² computed as sum(y^2) - sum(y)^2 / n cancels every digit in float64 once the
    # targets are ~1e8 with a spread of a few units: a good model was reported 0.0 or 1.0.
    rng = np.random.default_rng(4)
    target = offset + rng.normal(scale=3.0, size=(200, outputs) if outputs > 1 else 200)
    pred = target + rng.normal(scale=1.0, size=target.shape)
    out = RegressionResults()(torch.tensor(pred), torch.tensor(target))
    expected = skm.r2_score(target, pred)
    assert 0.8 < expected < 0.95
    assert out["r2"] == pytest.approx(expected, abs=1e-6)


def test_constant_targets_score_as_sklearn() -> None:
    target = np.full((4, 2), 1e9)
    pred = target.copy()
    pred[:, 1] += 0.5  # first output exact (R² 1), second off (R² 0), as sklearn forces them
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = skm.r2_score(target, pred)
    assert RegressionResults()(torch.tensor(pred), torch.tensor(target))["r2"] == expected
