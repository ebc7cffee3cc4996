"""AIToolbox's package around a Hugging Face ``evaluate`` metric (any object with ``compute``)."""

from __future__ import annotations

from typing import Any

from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
)

__all__ = ["HFEvaluateResultPackage"]


class HFEvaluateResultPackage(AbstractResultPackage):
    """Results of ``hf_evaluate_metric.compute(references=y_true, predictions=y_pred, ...)``.

    The metric object is given, never downloaded: build it with ``evaluate.load(...)``
    (``pip install evaluate``) or pass any object with a ``compute(**inputs)`` method. Every
    returned key gets the ``_HFEvaluate`` suffix.

    Args:
        hf_evaluate_metric: the metric object.
        use_models_additional_results: also pass the model's extra prediction outputs
            (``additional_results["additional_results"]``) to ``compute``.
        **kwargs: further inputs passed to ``compute`` on every call.
    """

    def __init__(
        self, hf_evaluate_metric: Any, use_models_additional_results: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(f"{type(hf_evaluate_metric).__name__}_HFEvaluate", np_array=False)
        self.metric = hf_evaluate_metric
        self.use_models_additional_results = use_models_additional_results
        self.metric_additional_inputs = kwargs

    def prepare_results_dict(self) -> dict[str, Any]:
        """The metric's results, keys suffixed with ``_HFEvaluate``."""
        inputs: dict[str, Any] = {
            "references": self.y_true,
            "predictions": self.y_predicted,
            **self.metric_additional_inputs,
        }
        extra = (self.additional_results or {}).get("additional_results")
        if self.use_models_additional_results and isinstance(extra, dict):
            inputs.update(extra)
        results = self.metric.compute(**inputs) or {}
        return {f"{name}_HFEvaluate": value for name, value in results.items()}
