"""AIToolbox result-package names over :mod:`scramjet.metrics`.

``package.prepare_result_package(y_true, y_pred, hyperparameters=None,
training_history=None)`` computes the metrics (note AIToolbox's argument order:
targets first); ``package.get_results()`` returns them. Packages combine with ``+``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scramjet import metrics as M


class AbstractResultPackage:
    """Base of the AIToolbox-named packages; wraps a :class:`scramjet.metrics.ResultPackage`.

    Args:
        pkg_name: name used as the results file name in a tracked run.
        package: the scramjet package that computes the metrics.
    """

    def __init__(self, pkg_name: str, package: M.ResultPackage) -> None:
        self.pkg_name = pkg_name
        self.package = package
        self.results_dict: dict[str, Any] | None = None
        self.hyperparameters: Mapping[str, Any] | None = None
        self.training_history: Any = None

    def prepare_result_package(
        self,
        y_true: Any,
        y_pred: Any,
        hyperparameters: Mapping[str, Any] | None = None,
        training_history: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Compute the metrics; extra keyword arguments (e.g. ``metadata``) are passed on."""
        self.hyperparameters, self.training_history = hyperparameters, training_history
        self.results_dict = self.package.compute(y_pred, y_true, kwargs.get("metadata"))
        return self.results_dict

    def get_results(self) -> dict[str, Any]:
        """The computed metrics.

        Raises:
            ValueError: ``prepare_result_package`` was not called yet.
        """
        if self.results_dict is None:
            raise ValueError(
                f"{type(self).__name__} has no results yet; call prepare_result_package(y_true, "
                f"y_pred) first (the TrainLoop does it at the end of training)."
            )
        return self.results_dict

    def __add__(self, other: AbstractResultPackage) -> AbstractResultPackage:
        if not isinstance(other, AbstractResultPackage):
            return NotImplemented
        return AbstractResultPackage(
            f"{self.pkg_name}+{other.pkg_name}", self.package + other.package
        )


class ClassificationResultPackage(AbstractResultPackage):
    """Accuracy, macro/micro precision, recall, F1 and the confusion matrix."""

    def __init__(self, num_classes: int | None = None, **kwargs: Any) -> None:
        super().__init__("ClassificationResult", M.ClassificationResults(num_classes))


class BinaryClassificationResultPackage(AbstractResultPackage):
    """Accuracy, ROC-AUC, PR-AUC and F1 for scores of the positive class."""

    def __init__(self, threshold: float = 0.5, **kwargs: Any) -> None:
        super().__init__("BinaryClassificationResult", M.BinaryResults(threshold))


class RegressionResultPackage(AbstractResultPackage):
    """MSE, MAE and R²."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("RegressionResult", M.RegressionResults())


class QuestionAnswerResultPackage(AbstractResultPackage):
    """SQuAD exact match and F1, plus ROUGE-1/2/L of the answers."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("QuestionAnswerResult", M.QAResults() + M.RougeResults())


class TextSummarizationResultPackage(AbstractResultPackage):
    """ROUGE-1/2/L."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("TextSummarizationResult", M.RougeResults())


class MachineTranslationResultPackage(AbstractResultPackage):
    """Corpus BLEU."""

    def __init__(self, n_gram: int = 4, smooth: bool = False, **kwargs: Any) -> None:
        super().__init__("MachineTranslationResult", M.BleuResults(n_gram, smooth))


class PerplexityResultPackage(AbstractResultPackage):
    """Perplexity from token logits and targets."""

    def __init__(self, ignore_index: int | None = None, **kwargs: Any) -> None:
        super().__init__("PerplexityResult", M.PerplexityResults(ignore_index))
