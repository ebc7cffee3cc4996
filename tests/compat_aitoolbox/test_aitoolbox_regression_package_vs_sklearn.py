"""``RegressionResultPackage`` against sklearn's metrics."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics

from scramjet.compat.aitoolbox import RegressionResultPackage


def _results(y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    package = RegressionResultPackage()
    package.prepare_result_package(y_true, y_pred)
    return package.get_results()


def test_one_output_matches_sklearn() -> None:
    rng = np.random.default_rng(0)
    y_true = rng.normal(size=40)
    y_pred = y_true + 0.3 * rng.normal(size=40)
    results = _results(y_true, y_pred)
    assert results["Mean_squared_error"] == pytest.approx(
        metrics.mean_squared_error(y_true, y_pred)
    )
    assert results["Mean_absolute_error"] == pytest.approx(
        metrics.mean_absolute_error(y_true, y_pred)
    )
    assert results["r2"] == pytest.approx(metrics.r2_score(y_true, y_pred))


def test_multi_output_r2_is_the_mean_of_the_per_output_r2() -> None:
    rng = np.random.default_rng(0)
    y_true = np.stack([rng.normal(size=30), 100 + 10 * rng.normal(size=30)], axis=1)
    y_pred = y_true + rng.normal(size=(30, 2))
    assert _results(y_true, y_pred)["r2"] == pytest.approx(metrics.r2_score(y_true, y_pred))
