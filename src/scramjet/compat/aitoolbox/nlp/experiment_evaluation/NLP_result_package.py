"""AIToolbox's NLP result packages, computed by :mod:`scramjet.metrics`."""

from __future__ import annotations

from typing import Any

from scramjet import metrics as M
from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
    MetricsResultPackage,
)

__all__ = [
    "MachineTranslationResultPackage",
    "PerplexityResultPackage",
    "QuestionAnswerResultPackage",
    "TextSummarizationResultPackage",
]


class QuestionAnswerResultPackage(MetricsResultPackage):
    """SQuAD exact match and F1, plus ROUGE-1/2/L of the answers."""

    def __init__(self, strict_content_check: bool = False, **kwargs: Any) -> None:
        package = M.QAResults() + M.RougeResults()
        super().__init__("QuestionAnswerResult", package, strict_content_check)


class TextSummarizationResultPackage(MetricsResultPackage):
    """ROUGE-1/2/L."""

    def __init__(self, strict_content_check: bool = False, **kwargs: Any) -> None:
        super().__init__("TextSummarizationResult", M.RougeResults(), strict_content_check)


class MachineTranslationResultPackage(MetricsResultPackage):
    """Corpus BLEU."""

    def __init__(
        self,
        n_gram: int = 4,
        smooth: bool = False,
        strict_content_check: bool = False,
        **kwargs: Any,
    ) -> None:
        package = M.BleuResults(n_gram, smooth)
        super().__init__("MachineTranslationResult", package, strict_content_check)


class PerplexityResultPackage(MetricsResultPackage):
    """Perplexity from token logits and targets."""

    def __init__(
        self, ignore_index: int | None = None, strict_content_check: bool = False, **kwargs: Any
    ) -> None:
        package = M.PerplexityResults(ignore_index)
        super().__init__("PerplexityResult", package, strict_content_check)
