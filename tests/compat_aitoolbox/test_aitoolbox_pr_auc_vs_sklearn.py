"""AIToolbox's PrecisionRecall_AUC is sklearn's auc(recall, precision), not average precision."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import auc, average_precision_score, precision_recall_curve

from scramjet.compat.aitoolbox.experiment.core_metrics.classification import (
    PrecisionRecallCurveAUCMetric,
)
from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
    BinaryClassificationResultPackage,
)


def _aitoolbox_pr_auc(y_true: np.ndarray, scores: np.ndarray) -> float:
    precision, recall, _ = precision_recall_curve(y_true, scores)
    return float(auc(recall, precision))


@pytest.mark.parametrize("seed", range(5))
def test_metric_matches_aitoolbox_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 2, 40)
    y_true[0] = 1
    scores = rng.random(40).round(1)  # ties, as in real predictions
    value = PrecisionRecallCurveAUCMetric(y_true, scores).get_metric()
    assert value == pytest.approx(_aitoolbox_pr_auc(y_true, scores), abs=1e-12)


def test_metric_differs_from_average_precision_here() -> None:
    y_true, scores = np.array([1, 0, 1, 1, 0]), np.array([0.9, 0.4, 0.2, 0.8, 0.6])
    value = PrecisionRecallCurveAUCMetric(y_true, scores).get_metric()
    assert value == pytest.approx(0.85)  # sklearn's auc(recall, precision)
    assert average_precision_score(y_true, scores) == pytest.approx(0.8666666)


def test_metric_without_positive_target_is_nan() -> None:
    assert np.isnan(PrecisionRecallCurveAUCMetric([0, 0, 0], [0.1, 0.5, 0.9]).get_metric())


def test_package_key_matches_aitoolbox_definition() -> None:
    y_true, scores = np.array([1, 0, 1, 1, 0]), np.array([0.9, 0.4, 0.2, 0.8, 0.6])
    results = BinaryClassificationResultPackage().prepare_result_package(
        torch.tensor(y_true), torch.tensor(scores)
    )
    assert results["PrecisionRecall_AUC"] == pytest.approx(_aitoolbox_pr_auc(y_true, scores))
    assert results["pr_auc"] == pytest.approx(average_precision_score(y_true, scores))
