"""AIToolbox's classification metrics over numpy and :mod:`scramjet.metrics`."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from scramjet.compat.aitoolbox.experiment.core_metrics.abstract_metric import AbstractBaseMetric
from scramjet.metrics._counts import binary_counts, roc_auc
from scramjet.metrics.classification import BinaryResults, _defined_or_nan

__all__ = [
    "AccuracyMetric",
    "F1ScoreMetric",
    "PrecisionRecallCurveAUCMetric",
    "ROCAUCMetric",
    "pr_curve_area",
]


def predicted_labels(y_predicted: np.ndarray, positive_class_thresh: float | None) -> np.ndarray:
    """Class labels: arg-max over columns of 2-D scores, else scores cut at the threshold.

    Whole numbers outside ``[0, 1]`` are class labels of a multi-class task and are kept as
    they are: cutting them at the threshold made every class but 0 the class 1.
    """
    if y_predicted.ndim == 2 and y_predicted.shape[1] > 1:
        labels: np.ndarray = np.argmax(y_predicted, axis=1)
        return labels
    flat = y_predicted.reshape(-1)
    if positive_class_thresh is None or _multiclass_labels(flat):
        return flat
    return (flat >= positive_class_thresh).astype(int)


def _multiclass_labels(values: np.ndarray) -> bool:
    """Whole numbers, some outside ``[0, 1]``: labels, not positive-class scores."""
    if values.size == 0 or not np.issubdtype(values.dtype, np.number):
        return False
    return bool(np.all(np.mod(values, 1) == 0) and (values.min() < 0 or values.max() > 1))


class AccuracyMetric(AbstractBaseMetric):
    """Share of correct predictions.

    Args:
        y_true: labels.
        y_predicted: labels, scores of the positive class, or per-class scores ``[N, C]``.
        positive_class_thresh: cut for positive-class scores; None: ``y_predicted`` already
            holds labels. Multi-class labels (whole numbers beyond 1) are never cut.
    """

    def __init__(
        self, y_true: Any, y_predicted: Any, positive_class_thresh: float | None = 0.5
    ) -> None:
        self.positive_class_thresh = positive_class_thresh
        super().__init__(y_true, y_predicted, metric_name="Accuracy")

    def calculate_metric(self) -> float:
        """Mean of ``label == target``."""
        labels = predicted_labels(self.y_predicted, self.positive_class_thresh)
        return float(np.mean(self.y_true.reshape(-1) == labels))


class ROCAUCMetric(AbstractBaseMetric):
    """Area under the ROC curve of positive-class scores, ranked as given (in float64, no
    sigmoid: large logits keep their order), as ``sklearn.metrics.roc_auc_score``. NaN,
    with a warning, when the targets hold one class only (it is undefined there)."""

    def __init__(self, y_true: Any, y_predicted: Any) -> None:
        super().__init__(y_true, y_predicted, metric_name="ROC_AUC")

    def calculate_metric(self) -> float:
        """Binary AUROC."""
        scores = torch.as_tensor(np.asarray(self.y_predicted, dtype=np.float64).reshape(-1))
        target = torch.as_tensor(np.asarray(self.y_true).reshape(-1))
        _, labels, order = BinaryResults()._scores_labels_order(scores, target)
        return _defined_or_nan(roc_auc, order, labels, "ROC-AUC", both=True)


def pr_curve_area(y_true: Any, scores: Any) -> float:
    """Trapezoidal area under the precision-recall curve, AIToolbox's ``PrecisionRecall_AUC``.

    AIToolbox computed ``auc(recall, precision)`` over sklearn's ``precision_recall_curve``
    (one point per distinct score, and ``(recall 0, precision 1)``), which is not the
    average precision (a step sum). NaN when there is no positive target.
    """
    score = np.asarray(scores, dtype=np.float64).reshape(-1)
    order = np.argsort(-score, kind="mergesort")
    positive = (np.asarray(y_true).reshape(-1)[order] == 1).astype(np.float64)
    ends = np.r_[np.flatnonzero(np.diff(score[order])), score.size - 1]
    tps = np.cumsum(positive)[ends]
    if score.size == 0 or tps[-1] == 0:
        return float("nan")
    precision = np.r_[1.0, tps / (ends + 1)]
    recall = np.r_[0.0, tps / tps[-1]]
    return float(np.sum(np.diff(recall) * (precision[1:] + precision[:-1]) / 2))


class PrecisionRecallCurveAUCMetric(AbstractBaseMetric):
    """Area under the precision-recall curve of positive-class scores (trapezoidal, as
    AIToolbox computed it; see :func:`pr_curve_area`)."""

    def __init__(self, y_true: Any, y_predicted: Any) -> None:
        super().__init__(y_true, y_predicted, metric_name="PrecisionRecall_AUC")

    def calculate_metric(self) -> float:
        """Trapezoidal PR-curve area."""
        return pr_curve_area(self.y_true, self.y_predicted)


class F1ScoreMetric(AbstractBaseMetric):
    """F1 of the positive class from scores cut at ``positive_class_thresh`` (a score equal
    to it is positive, as in :class:`AccuracyMetric`); ``None``: ``y_predicted`` holds 0/1
    labels."""

    def __init__(
        self, y_true: Any, y_predicted: Any, positive_class_thresh: float | None = 0.5
    ) -> None:
        self.positive_class_thresh = positive_class_thresh
        super().__init__(y_true, y_predicted, metric_name="F1_score")

    def calculate_metric(self) -> float:
        """Binary F1 (in float64)."""
        scores = np.asarray(self.y_predicted, dtype=np.float64).reshape(-1)
        cut = self.positive_class_thresh
        decided = scores >= cut if cut is not None else scores == 1
        target = torch.as_tensor(np.asarray(self.y_true).reshape(-1) == 1)
        return binary_counts(torch.as_tensor(decided), target.long())["f1"]
