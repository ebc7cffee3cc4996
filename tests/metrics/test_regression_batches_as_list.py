"""``RegressionResults`` given per-batch lists of predictions and targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from scramjet.metrics import RegressionResults


def test_batches_of_different_sizes_are_refused_not_padded() -> None:
    # A list of per-batch tensors (the last batch smaller) was padded with -100 on both
    # sides, and every padded pair counted as an exact prediction: the MSE was too low.
    rng = np.random.default_rng(5)
    pred, target = torch.tensor(rng.normal(size=74)), torch.tensor(rng.normal(size=74))
    with pytest.raises(ValueError, match=r"y_pred is a list of 3 .*torch\.cat"):
        RegressionResults()(list(pred.split(32)), list(target.split(32)))
    joined = RegressionResults()(torch.cat(list(pred.split(32))), target)
    assert joined["mse"] == pytest.approx(skm.mean_squared_error(target, pred), rel=1e-12)
