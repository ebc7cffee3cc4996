"""Result packages: groups of metrics computed from a dataset's predictions.

Combine packages with ``+``; compute them with ``package(y_pred, y_true)`` or
``package.evaluate(trainer, dataset)`` (predictions gathered across processes, one per
sample, in dataset order).
"""

from __future__ import annotations

from scramjet.metrics.base import CombinedResults, ResultPackage
from scramjet.metrics.classification import BinaryResults, ClassificationResults, RegressionResults
from scramjet.metrics.multilabel import MultiLabelResults
from scramjet.metrics.nlp import (
    BleuResults,
    PerplexityResults,
    QAResults,
    RougeResults,
    lcs_length,
    perplexity_from_loss,
    rouge_l,
    rouge_n,
    tokenize,
)

__all__ = [
    "BinaryResults",
    "BleuResults",
    "ClassificationResults",
    "CombinedResults",
    "MultiLabelResults",
    "PerplexityResults",
    "QAResults",
    "RegressionResults",
    "ResultPackage",
    "RougeResults",
    "lcs_length",
    "perplexity_from_loss",
    "rouge_l",
    "rouge_n",
    "tokenize",
]
