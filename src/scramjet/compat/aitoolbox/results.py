"""AIToolbox's result packages under one import (the modules keep AIToolbox's paths).

``package.prepare_result_package(y_true, y_pred, hyperparameters=None, **extra)`` computes
the metrics (note AIToolbox's argument order: targets first); ``package.get_results()``
returns them. Prepared packages combine with ``+`` into a
:class:`MultipleResultPackageWrapper` whose results are keyed by package name.
"""

from __future__ import annotations

from scramjet.compat.aitoolbox.experiment.result_package.abstract_result_packages import (
    AbstractResultPackage,
    MultipleResultPackageWrapper,
    PreCalculatedResultPackage,
)
from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
    BinaryClassificationResultPackage,
    ClassificationResultPackage,
    GeneralResultPackage,
    MetricsResultPackage,
    RegressionResultPackage,
)
from scramjet.compat.aitoolbox.nlp.experiment_evaluation.NLP_result_package import (
    MachineTranslationResultPackage,
    PerplexityResultPackage,
    QuestionAnswerResultPackage,
    TextSummarizationResultPackage,
)

__all__ = [
    "AbstractResultPackage",
    "BinaryClassificationResultPackage",
    "ClassificationResultPackage",
    "GeneralResultPackage",
    "MachineTranslationResultPackage",
    "MetricsResultPackage",
    "MultipleResultPackageWrapper",
    "PerplexityResultPackage",
    "PreCalculatedResultPackage",
    "QuestionAnswerResultPackage",
    "RegressionResultPackage",
    "TextSummarizationResultPackage",
]
