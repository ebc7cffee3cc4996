"""``RegressionResults`` given a list of equal-size tensors: per-batch pieces of the
predictions (joined with ``torch.cat``) or per-sample rows of ``k`` outputs (``torch.stack``),
checked against scikit-learn on the joined values."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

from scramjet.metrics import RegressionResults


def _data(n: int, k: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(3)
    shape = (n,) if k is None else (n, k)
    target = torch.tensor(rng.normal(size=shape))
    return target + torch.tensor(rng.normal(scale=0.5, size=shape)), target


def test_a_list_of_batches_against_joined_targets_is_read_as_batches() -> None:
    # 2 x [32] stacked into [2, 32] was read as 2 samples of 32 outputs: R² -1089 here
    # where sklearn, on the 64 values, gives a positive score.
    pred, target = _data(64)
    out = RegressionResults()(list(pred.split(32)), target)
    assert out["r2"] == pytest.approx(skm.r2_score(target, pred), rel=1e-9)
    assert out["mse"] == pytest.approx(skm.mean_squared_error(target, pred), rel=1e-9)
    swapped = RegressionResults()(pred, list(target.split(32)))
    assert swapped["r2"] == pytest.approx(skm.r2_score(target, pred), rel=1e-9)


def test_a_list_of_two_dimensional_batches_is_joined_not_stacked() -> None:
    pred, target = _data(64, 3)
    out = RegressionResults()(list(pred.split(16)), list(target.split(16)))
    assert out["r2"] == pytest.approx(skm.r2_score(target, pred), rel=1e-9)


def test_a_list_of_per_sample_rows_against_a_matrix_is_stacked() -> None:
    pred, target = _data(10, 4)
    out = RegressionResults()(list(pred.unbind(0)), target)
    assert out["r2"] == pytest.approx(skm.r2_score(target, pred), rel=1e-9)


def test_both_lists_of_equal_one_dimensional_tensors_are_ambiguous() -> None:
    pred, target = _data(64)
    with pytest.raises(ValueError, match=r"2 tensors of shape \(32,\).*torch\.cat.*torch\.stack"):
        RegressionResults()(list(pred.split(32)), list(target.split(32)))


def test_nested_lists_of_numbers_are_still_a_matrix() -> None:
    pred, target = _data(6, 2)
    out = RegressionResults()(pred.tolist(), target.tolist())
    assert out["r2"] == pytest.approx(skm.r2_score(target, pred), rel=1e-9)
