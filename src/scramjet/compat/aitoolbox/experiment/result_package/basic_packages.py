"""AIToolbox's general result packages, computed by :mod:`scramjet.metrics`.

Each package keeps AIToolbox's name and arguments; the metrics come from the scramjet
package it wraps (``package``), so a TrainLoop and :class:`scramjet.Trainer` report the
same numbers. Note AIToolbox's argument order: ``prepare_result_package(y_true, y_pred)``.
"""

from __future__ import annotations

from typing import Any

from scramjet import metrics as M
from scramjet.compat.aitoolbox.experiment.core_metrics.classification import pr_curve_area
from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
)
from scramjet.metrics._counts import binary_counts

__all__ = [
    "BinaryClassificationResultPackage",
    "ClassificationResultPackage",
    "GeneralResultPackage",
    "MetricsResultPackage",
    "RegressionResultPackage",
]


class MetricsResultPackage(AbstractResultPackage):
    """A result package whose metrics a :class:`scramjet.metrics.ResultPackage` computes.

    Args:
        pkg_name: the package's name.
        package: the scramjet package; it receives ``(y_pred, y_true, metadata)``, where
            ``metadata`` is the ``metadata=`` keyword of ``prepare_result_package``, or else
            its ``additional_results=`` keyword (where AIToolbox's evaluation callbacks
            put the metadata the loop's predictions collected).
        strict_content_check: see :class:`AbstractResultPackage`.
    """

    def __init__(
        self,
        pkg_name: str,
        package: M.ResultPackage,
        strict_content_check: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(pkg_name, strict_content_check, np_array=False, **kwargs)
        self.package = package

    def prepare_results_dict(self) -> dict[str, Any]:
        """The wrapped scramjet package's results."""
        extra = self.additional_results or {}
        metadata = extra.get("metadata")
        if metadata is None:
            metadata = extra.get("additional_results")
        return self.package.compute(self.y_predicted, self.y_true, metadata)


class ClassificationResultPackage(MetricsResultPackage):
    """Accuracy, macro/micro precision, recall and F1, and the confusion matrix.

    The results hold AIToolbox's own key, ``Accuracy``, beside scramjet's ``accuracy``, so
    code that reads ``results["Accuracy"]`` keeps working.
    """

    def __init__(
        self, num_classes: int | None = None, strict_content_check: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(
            "ClassificationResult", M.ClassificationResults(num_classes), strict_content_check
        )

    def prepare_results_dict(self) -> dict[str, Any]:
        """AIToolbox's ``Accuracy`` first, then scramjet's classification results."""
        results = super().prepare_results_dict()
        return {"Accuracy": results["accuracy"], **results}


def _with_aitoolbox_keys(results: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``results`` led by AIToolbox's names (``names``: AIToolbox's key -> scramjet's key)."""
    return {**{old: results[new] for old, new in names.items() if new in results}, **results}


_BINARY_KEYS = {
    "Accuracy": "accuracy",
    "ROC_AUC": "roc_auc",
    "PrecisionRecall_AUC": "pr_auc",
    "F1_score": "f1",
}
_REGRESSION_KEYS = {"Mean_squared_error": "mse", "Mean_absolute_error": "mae"}


class BinaryClassificationResultPackage(MetricsResultPackage):
    """Accuracy, ROC-AUC, PR-AUC and F1 from scores of the positive class.

    The results hold AIToolbox's keys (``Accuracy``, ``ROC_AUC``, ``PrecisionRecall_AUC``,
    ``F1_score``) beside scramjet's (``accuracy``, ``roc_auc``, ``pr_auc``, ``f1``).

    Args:
        positive_class_thresh: scores at or above it count as the positive class
            (``threshold`` is accepted as another name for it).
    """

    def __init__(
        self,
        positive_class_thresh: float = 0.5,
        strict_content_check: bool = False,
        threshold: float | None = None,
        **kwargs: Any,
    ) -> None:
        self.cut = positive_class_thresh if threshold is None else threshold
        self.binary = M.BinaryResults(self.cut)
        super().__init__("BinaryClassificationResult", self.binary, strict_content_check)

    def prepare_results_dict(self) -> dict[str, Any]:
        """AIToolbox's ``Accuracy``, ``ROC_AUC``, ``PrecisionRecall_AUC`` and ``F1_score``
        first, then scramjet's binary results.

        ``PrecisionRecall_AUC`` is AIToolbox's trapezoidal area under the precision-recall
        curve (:func:`pr_curve_area`); scramjet's ``pr_auc`` is the average precision.
        Accuracy and F1 count a score equal to the threshold as positive, as AIToolbox
        did (``BinaryResults`` alone counts scores above it)."""
        results = super().prepare_results_dict()
        scores, labels = self.binary.scores_and_labels(self.y_predicted, self.y_true)
        results.update(binary_counts(scores >= self.cut, labels))
        results = _with_aitoolbox_keys(results, _BINARY_KEYS)
        results["PrecisionRecall_AUC"] = pr_curve_area(labels.numpy(), scores.numpy())
        return results


class RegressionResultPackage(MetricsResultPackage):
    """MSE, MAE and R².

    The results hold AIToolbox's keys (``Mean_squared_error``, ``Mean_absolute_error``)
    beside scramjet's (``mse``, ``mae``, ``r2``).
    """

    def __init__(self, strict_content_check: bool = False, **kwargs: Any) -> None:
        super().__init__("RegressionResult", M.RegressionResults(), strict_content_check)

    def prepare_results_dict(self) -> dict[str, Any]:
        """AIToolbox's ``Mean_squared_error`` and ``Mean_absolute_error`` first, then
        scramjet's regression results."""
        return _with_aitoolbox_keys(super().prepare_results_dict(), _REGRESSION_KEYS)


class GeneralResultPackage(AbstractResultPackage):
    """Results of a list of AIToolbox metric classes, each called as ``metric(y_true, y_pred)``.

    Args:
        metrics_list: classes (or callables) returning an object with ``get_metric_dict()``,
            such as :class:`~scramjet.compat.aitoolbox.experiment.core_metrics.classification.AccuracyMetric`.
    """

    def __init__(
        self, metrics_list: list[Any], strict_content_check: bool = False, **kwargs: Any
    ) -> None:
        super().__init__("GeneralResultPackage", strict_content_check, **kwargs)
        self.metrics_list = list(metrics_list)

    def prepare_results_dict(self) -> dict[str, Any]:
        """Every metric's ``get_metric_dict()``, merged."""
        results: dict[str, Any] = {}
        for metric in self.metrics_list:
            results.update(metric(self.y_true, self.y_predicted).get_metric_dict())
        return results
