"""Classification metrics as ratios of integer counts, divided in float64.

torchmetrics divides its counts in float32: the accuracy of 997 samples it gives differs
from the exact ratio (scikit-learn's) in the 8th digit, whatever the dtype of the scores.
These functions count the same decisions (thresholds and the sigmoid of logits as
torchmetrics applies them) and divide in float64, so the results match ``sklearn.metrics``
to the last digits or so.
"""

from __future__ import annotations

from typing import Any

import torch


def ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """``num / den`` in float64, 0 where ``den`` is 0 (scikit-learn's ``zero_division=0``)."""
    num, den = num.double(), den.double()
    return torch.where(den > 0, num / den.clamp_min(1), torch.zeros_like(num))


def decisions(
    scores: torch.Tensor, threshold: float, kept: torch.Tensor | None = None
) -> torch.Tensor:
    """Positive decisions (bool) of probabilities above ``threshold``; scores that are not all
    in [0, 1] are logits and go through a sigmoid first (in float32 at least: a float16
    sigmoid rounds a logit of 4e-4 to 0.5), as torchmetrics reads them. ``kept``: the
    scores that count (padded ones, -100, do not make probabilities logits)."""
    scored = scores if kept is None else scores[kept]
    if not bool(((scored >= 0) & (scored <= 1)).all()):
        scores = (scores if scores.dtype == torch.float64 else scores.float()).sigmoid()
    return scores > threshold


def _precision_recall_f1(
    tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per class (or summed) precision, recall and F1 of the counts; 0 where undefined."""
    return ratio(tp, tp + fp), ratio(tp, tp + fn), ratio(2 * tp, 2 * tp + fp + fn)


def averaged_rates(
    tp: torch.Tensor, fp: torch.Tensor, fn: torch.Tensor, counted: torch.Tensor
) -> dict[str, float]:
    """``precision_``, ``recall_`` and ``f1_`` ``macro`` (the mean over the classes where
    ``counted``) and ``micro`` (from the summed counts), from per-class counts."""
    out: dict[str, float] = {}
    macro = _precision_recall_f1(tp, fp, fn)
    micro = _precision_recall_f1(tp.sum(), fp.sum(), fn.sum())
    for name, per_class in zip(("precision", "recall", "f1"), macro):
        out[f"{name}_macro"] = float(per_class[counted].mean()) if bool(counted.any()) else 0.0
    for name, pooled in zip(("precision", "recall", "f1"), micro):
        out[f"{name}_micro"] = float(pooled)
    return out


def multiclass_metrics(pred: torch.Tensor, target: torch.Tensor, n: int) -> dict[str, Any]:
    """Accuracy, macro/micro precision, recall and F1 and the confusion matrix (rows: the
    targets) of labels in ``[0, n)``; macro averages over the classes that a target or a
    prediction holds, as scikit-learn's defaults."""
    matrix = torch.bincount(target * n + pred, minlength=n * n).reshape(n, n)
    tp = matrix.diagonal()
    fp, fn = matrix.sum(dim=0) - tp, matrix.sum(dim=1) - tp
    out: dict[str, Any] = {"accuracy": float(ratio(tp.sum(), matrix.sum()))}
    out.update(averaged_rates(tp, fp, fn, counted=(tp + fp + fn) > 0))
    out["confusion_matrix"] = matrix.tolist()
    return out


def binary_counts(decided: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """Accuracy and F1 of bool decisions against 0/1 targets."""
    positive = target == 1
    tp = (decided & positive).sum()
    fp, fn = (decided & ~positive).sum(), (~decided & positive).sum()
    return {
        "accuracy": float(ratio((decided == positive).sum(), torch.tensor(target.numel()))),
        "f1": float(ratio(2 * tp, 2 * tp + fp + fn)),
    }


def _curve(scores: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """True and false positives (float64) counted above each distinct score, highest first."""
    order = torch.argsort(scores, descending=True, stable=True)
    ranked, hits = scores[order], target[order].double()
    last = torch.cat(
        [(ranked[1:] != ranked[:-1]).nonzero().flatten(), torch.tensor([ranked.numel() - 1])]
    )
    tps = hits.cumsum(dim=0)[last]
    return tps, (last + 1).double() - tps


def roc_auc(scores: torch.Tensor, target: torch.Tensor) -> float:
    """Area under the ROC curve (trapezoids, as ``sklearn.metrics.roc_auc_score``); the
    targets must hold both classes."""
    tps, fps = _curve(scores, target)
    zero = torch.zeros(1, dtype=torch.float64)
    tpr, fpr = torch.cat([zero, tps / tps[-1]]), torch.cat([zero, fps / fps[-1]])
    return float(torch.trapezoid(tpr, fpr))


def average_precision(scores: torch.Tensor, target: torch.Tensor) -> float:
    """Average precision, as ``sklearn.metrics.average_precision_score``: the precision at
    each distinct score weighted by the recall it adds; the targets must hold a positive."""
    tps, fps = _curve(scores, target)
    added = torch.diff(tps, prepend=torch.zeros(1, dtype=torch.float64)) / tps[-1]
    return float((added * tps / (tps + fps)).sum())


def multilabel_metrics(
    decided: torch.Tensor, target: torch.Tensor, kept: torch.Tensor
) -> dict[str, float]:
    """Subset accuracy, Hamming loss and macro/micro precision, recall and F1 of bool
    decisions ``[N, L]`` against 0/1 targets, counting the labels where ``kept`` (a label
    left out counts as right for its sample's subset accuracy, as torchmetrics does)."""
    positive = target == 1
    tp = (decided & positive & kept).sum(dim=0)
    fp = (decided & ~positive & kept).sum(dim=0)
    fn = (~decided & positive & kept).sum(dim=0)
    right = (decided == positive) | ~kept
    scored = kept.sum()
    out = {
        "subset_accuracy": float(ratio(right.all(dim=1).sum(), torch.tensor(target.shape[0]))),
        "hamming_loss": float(ratio((fp + fn).sum(), scored)),  # wrong / scored labels
    }
    out.update(averaged_rates(tp, fp, fn, counted=torch.ones_like(tp, dtype=torch.bool)))
    return out
