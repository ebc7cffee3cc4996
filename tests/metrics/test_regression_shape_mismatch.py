"""``RegressionResults`` refuses predictions and targets whose shapes do not line up."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from scramjet.metrics import RegressionResults


@pytest.mark.parametrize(
    ("pred_shape", "target_shape"),
    [((6,), (3, 2)), ((3, 2), (6,)), ((2, 3), (3, 2)), ((3, 2, 1), (6,))],
)
def test_predictions_that_only_share_a_size_are_refused(
    pred_shape: tuple[int, ...], target_shape: tuple[int, ...]
) -> None:
    # Flattening both sides whenever their sizes agreed paired each prediction with some
    # other sample's output (a [3, 2] against a [2, 3] is transposed), and gave a number.
    rng = np.random.default_rng(0)
    pred = torch.tensor(rng.normal(size=pred_shape))
    target = torch.tensor(rng.normal(size=target_shape))
    with pytest.raises(ValueError) as info:
        skm.mean_squared_error(target.numpy(), pred.numpy())
    with pytest.raises(ValueError, match=r"y_pred has shape .* y_true") as info:
        RegressionResults()(pred, target)
    message = str(info.value)
    assert str(tuple(pred_shape)) in message and str(tuple(target_shape)) in message


@pytest.mark.parametrize(
    ("pred_shape", "target_shape"), [((5,), (5, 1)), ((5, 1), (5,)), ((5, 2), (5, 2))]
)
def test_unambiguous_shapes_match_sklearn(
    pred_shape: tuple[int, ...], target_shape: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(1)
    target = rng.normal(size=target_shape)
    pred = target.reshape(pred_shape) + rng.normal(scale=0.3, size=pred_shape)
    out = RegressionResults()(torch.tensor(pred), torch.tensor(target))
    flat = (-1, target_shape[1] if len(target_shape) == 2 else 1)
    ref_t, ref_p = target.reshape(flat), pred.reshape(flat)
    assert out["mse"] == pytest.approx(skm.mean_squared_error(ref_t, ref_p), rel=1e-12)
    assert out["r2"] == pytest.approx(skm.r2_score(ref_t, ref_p), rel=1e-12)
