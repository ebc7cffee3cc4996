"""Multi-label result package: several 0/1 labels per sample, scored as scikit-learn does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import torch

from scramjet.metrics._counts import decisions, multilabel_metrics
from scramjet.metrics.base import ResultPackage, as_tensor
from scramjet.metrics.classification import (
    _refuse_nan,
    check_probabilities,
    check_scores_kind,
)
from scramjet.trainer.batch import PAD_VALUE


class MultiLabelResults(ResultPackage):
    """Multi-label: subset accuracy, Hamming loss, macro/micro precision, recall and F1.

    ``y_true`` holds several 0/1 labels per sample ``[N, L]`` (multi-hot rows); ``y_pred``
    is one score per label ``[N, L]``: probabilities (a label is predicted above
    ``threshold``), logits (values outside [0, 1] go through a sigmoid first, as
    :class:`BinaryResults` reads them), or 0/1 labels. The names follow
    ``sklearn.metrics``: ``subset_accuracy`` is ``accuracy_score`` (a sample counts when
    all its labels are right), ``hamming_loss`` the fraction of wrong labels, and the
    ``_macro`` / ``_micro`` values ``precision_score``, ``recall_score`` and ``f1_score``
    with ``average=`` that (``zero_division=0``: a label no sample holds or is predicted
    to hold counts 0 in the macro averages). Targets equal to -100 are left out.

    Logits that all happen to lie in [0, 1] (an untrained model's, say) cannot be told from
    probabilities: pass ``scores="logits"`` when the model outputs logits (they then always
    go through a sigmoid), as :class:`BinaryResults` takes it.

    Args:
        threshold: probability above which a label counts as predicted.
        scores: what the scores are: ``"auto"`` (the default: read from their values, as
            above), ``"logits"`` or ``"probabilities"`` (values outside [0, 1] refused).
    """

    name = "multilabel"

    def __init__(
        self,
        threshold: float = 0.5,
        scores: Literal["auto", "logits", "probabilities"] = "auto",
    ) -> None:
        check_scores_kind("MultiLabelResults", scores)
        self.threshold = threshold
        self.scores = scores

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """See the class docstring."""
        pred, target = as_tensor(y_pred, "y_pred"), as_tensor(y_true, "y_true")
        _check_multilabel(pred, target)
        kept = target != PAD_VALUE
        if pred.is_floating_point():
            _refuse_nan(pred, kept, "MultiLabelResults")
            pred = self._as_probabilities(pred, kept)
        else:
            pred = pred.float()
        return multilabel_metrics(decisions(pred, self.threshold, kept), target, kept)

    def _as_probabilities(self, pred: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
        """``pred`` through a sigmoid when stated logits; checked when stated probabilities."""
        if self.scores == "logits":
            return (pred if pred.dtype == torch.float64 else pred.float()).sigmoid()
        if self.scores == "probabilities":
            check_probabilities("MultiLabelResults", pred[kept])
        return pred


def _check_multilabel(pred: torch.Tensor, target: torch.Tensor) -> None:
    """Raise unless ``target`` is ``[N, L]`` 0/1 labels (or -100) and ``pred`` the same shape."""
    if target.dim() != 2 or pred.shape != target.shape or not target.shape[0]:
        raise ValueError(
            f"MultiLabelResults needs targets [N, L] (N > 0 samples, L labels of 0/1 each) "
            f"and one score per label of the same shape; received y_pred "
            f"{tuple(pred.shape)} and y_true {tuple(target.shape)}. For one class per "
            f"sample use ClassificationResults, for one 0/1 label per sample BinaryResults."
        )
    other = target[(target != 0) & (target != 1) & (target != PAD_VALUE)]
    if other.numel():
        raise ValueError(
            f"MultiLabelResults: targets must be 0 or 1 (or {PAD_VALUE} to skip); y_true "
            f"holds {other[0].item()} ({int(other.numel())} other value(s)). For class "
            f"indices use ClassificationResults; for soft targets pass (y_true > 0.5).long()."
        )
