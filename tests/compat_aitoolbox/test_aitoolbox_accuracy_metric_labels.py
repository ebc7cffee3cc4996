"""``AccuracyMetric`` given class labels matches sklearn, whatever the number of classes."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score

from scramjet.compat.aitoolbox.experiment.core_metrics.classification import AccuracyMetric


@pytest.mark.parametrize("shape", [(-1,), (-1, 1)])
def test_multiclass_labels_are_compared_as_labels_not_cut_at_the_threshold(shape) -> None:
    rng = np.random.default_rng(0)
    y_true, y_pred = rng.integers(0, 4, 60), rng.integers(0, 4, 60)
    metric = AccuracyMetric(y_true.reshape(shape), y_pred.reshape(shape))  # default threshold
    assert metric.get_metric() == pytest.approx(accuracy_score(y_true, y_pred))


def test_positive_class_scores_are_still_cut_at_the_threshold() -> None:
    y_true = np.array([1, 0, 1, 0, 1, 1])
    scores = np.array([0.1, 0.6, 0.3, 0.2, 1.0, 0.9])
    expected = accuracy_score(y_true, scores >= 0.5)
    assert AccuracyMetric(y_true, scores).get_metric() == pytest.approx(expected)
