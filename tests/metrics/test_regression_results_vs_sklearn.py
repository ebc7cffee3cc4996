"""``RegressionResults`` against ``sklearn.metrics`` on multi-output and degenerate inputs."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from scramjet.metrics import RegressionResults


@pytest.mark.parametrize("outputs", [2, 5])
def test_one_sample_of_several_outputs_has_no_r2(outputs: int) -> None:
    # R² of one sample is undefined however many outputs it has: sklearn gives NaN (with
    # a warning), and so does the documented contract; pooling the outputs of that one
    # sample as if they were samples gave a number (0.0 for [1, 2] against [1.5, 2.5]).
    pred = torch.arange(outputs, dtype=torch.float32).unsqueeze(0)
    target = pred + 0.5
    out = RegressionResults()(pred, target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = skm.r2_score(target.double().numpy(), pred.double().numpy())
    assert math.isnan(reference)
    assert math.isnan(out["r2"]), out
    assert out["mse"] == pytest.approx(0.25, rel=1e-12)
    assert out["mae"] == pytest.approx(0.5, rel=1e-12)


def test_several_samples_of_several_outputs_match_sklearn() -> None:
    rng = np.random.default_rng(7)
    target = rng.normal(size=(2, 3))
    pred = target + rng.normal(scale=0.3, size=(2, 3))
    out = RegressionResults()(torch.tensor(pred), torch.tensor(target))
    assert out["r2"] == pytest.approx(skm.r2_score(target, pred), abs=1e-12)
    assert out["mse"] == pytest.approx(skm.mean_squared_error(target, pred), rel=1e-12)


@pytest.mark.parametrize("where", ["y_pred", "y_true"])
def test_nan_is_refused_as_sklearn_does(where: str) -> None:
    # A NaN prediction (a diverged model) or target (a missing value) made every metric
    # NaN without a word; sklearn refuses such input, as ClassificationResults does.
    target = torch.tensor([1.0, 2.0, 3.0, 4.0])
    pred = target + 0.1
    bad = pred if where == "y_pred" else target
    bad[2] = float("nan")
    with pytest.raises(ValueError, match="Input contains NaN"):
        skm.mean_squared_error(target.numpy(), pred.numpy())
    with pytest.raises(ValueError, match=rf"{where} holds 1 NaN .*index 2"):
        RegressionResults()(pred, target)
