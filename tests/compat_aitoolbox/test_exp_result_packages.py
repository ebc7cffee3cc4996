"""AIToolbox result packages and metrics: subclassing, combining, and the numbers they report."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torchmetrics.classification import MulticlassAccuracy

from scramjet import metrics as M
from scramjet.compat.aitoolbox.experiment.core_metrics.classification import (
    AccuracyMetric,
    ROCAUCMetric,
)
from scramjet.compat.aitoolbox.experiment.core_metrics.regression import MeanSquaredErrorMetric
from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
    MultipleResultPackageWrapper,
)
from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
    ClassificationResultPackage,
    GeneralResultPackage,
    RegressionResultPackage,
)
from scramjet.compat.aitoolbox.experiment.result_package.torch_metrics_packages import (
    TorchMetricsPackage,
)


class MeanError(AbstractResultPackage):
    """A user package written the documented way: only prepare_results_dict."""

    def __init__(self) -> None:
        super().__init__("MeanError")

    def prepare_results_dict(self) -> dict[str, Any]:
        return {"mean_error": float(np.mean(self.y_predicted - self.y_true))}


def test_user_subclass_computes_from_numpy_inputs_and_keeps_hyperparameters() -> None:
    pkg = MeanError()
    pkg.prepare_result_package([1.0, 2.0, 3.0], [2.0, 2.0, 5.0], {"lr": 0.1})
    assert pkg.get_results() == {"mean_error": 1.0}
    assert isinstance(pkg.y_true, np.ndarray) and pkg.get_hyperparameters() == {"lr": 0.1}
    assert str(pkg) == "mean_error: 1.0" and pkg["mean_error"] == 1.0 and "mean_error" in pkg


def test_combining_needs_prepared_packages_and_keeps_them_apart() -> None:
    a, b = MeanError(), MeanError()
    with pytest.raises(ValueError, match="prepare_result_package"):
        _ = a + b
    a.prepare_result_package([0.0], [1.0])
    b.prepare_result_package([0.0], [3.0])
    combined = a + b + {"extra": 7}
    assert combined.get_results() == {
        "MeanError": {"mean_error": 1.0},
        "MeanError1": {"mean_error": 3.0},
        "PreCalculatedResult": {"extra": 7},
    }
    with pytest.raises(ValueError, match="mean_error"):
        a += b  # same metric name in both


def test_wrapper_evaluates_scramjet_packages_like_scramjet_metrics() -> None:
    y_true = torch.tensor([0, 1, 2, 1, 0, 2])
    logits = torch.tensor(
        [[3.0, 0, 0], [0, 2.0, 0], [0, 3.0, 0], [0, 2.0, 0], [1.0, 0, 0], [0, 0, 2.0]]
    )
    wrapper = MultipleResultPackageWrapper()
    wrapper.prepare_result_package([ClassificationResultPackage(), RegressionResultPackage()])
    results = wrapper.prepare_result_package(y_true, logits.argmax(1).float(), hyperparameters={})
    expected = M.ClassificationResults()(logits, y_true)
    assert results["ClassificationResult"]["accuracy"] == pytest.approx(expected["accuracy"])
    assert results["ClassificationResult"]["accuracy"] == pytest.approx(5 / 6)
    assert results["RegressionResult"]["mse"] == pytest.approx(1 / 6)


def test_torch_metrics_package_reports_the_metric_value() -> None:
    pkg = TorchMetricsPackage(MulticlassAccuracy(num_classes=3))
    pkg.prepare_result_package(torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 1, 2]))
    assert pkg.get_results() == {"MulticlassAccuracy_PTLMetrics": pytest.approx(0.8333, abs=1e-3)}


def test_core_metrics_values() -> None:
    assert AccuracyMetric([0, 1, 1], [[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]]).get_metric() == 2 / 3
    roc = ROCAUCMetric([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    assert roc.get_metric_dict() == {"ROC_AUC": pytest.approx(0.75)}
    assert MeanSquaredErrorMetric([1.0, 2.0], [2.0, 4.0]).get_metric() == 2.5
    general = GeneralResultPackage([AccuracyMetric, MeanSquaredErrorMetric])
    general.prepare_result_package([1, 0], [1, 1])
    assert general.get_results() == {"Accuracy": 0.5, "Mean_squared_error": 0.5}
    with pytest.raises(ValueError, match="single-number"):
        _ = ROCAUCMetric([0, 1], [0.2, 0.9]) < {"a": 1}
