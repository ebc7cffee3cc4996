"""Classification, binary classification and regression result packages (torchmetrics)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import torch
from torchmetrics.functional import regression as R

from scramjet.metrics._counts import (
    average_precision,
    binary_counts,
    decisions,
    multiclass_metrics,
    roc_auc,
)
from scramjet.metrics.base import ResultPackage, as_tensor, warn_if_unshifted
from scramjet.runtime.stacklevel import user_stacklevel
from scramjet.trainer.batch import PAD_VALUE


def _labels(y_pred: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """Predicted classes: the arg-max of scores ``[..., C]``, labels as given, or the
    thresholded score of a binary classifier (see :class:`ClassificationResults`).
    ``kept``: the targets that are not padding (their shape is the targets')."""
    if y_pred.dim() > kept.dim() and y_pred.shape[-1] == 1:
        y_pred = y_pred.squeeze(-1)  # one score per sample: its arg-max would always be 0
    elif y_pred.dim() > kept.dim():
        return y_pred.argmax(dim=-1)
    if y_pred.is_floating_point() and (
        y_pred.shape != kept.shape or not bool((y_pred == y_pred.round()).all())
    ):
        # Scores, not labels (truncating them would make every prediction class 0): a
        # probability above 0.5, or a logit above 0 (values outside [0, 1], as BinaryResults).
        # Padded positions (-100 where the target is padding) do not make probabilities
        # logits.
        scored = y_pred[kept] if y_pred.shape == kept.shape else y_pred
        inside = bool(((scored >= 0) & (scored <= 1)).all())
        return (y_pred > (0.5 if inside else 0.0)).long()
    return y_pred.long()


def _class_distributions(
    target: torch.Tensor, scores: torch.Tensor, multi_label: bool | None = None
) -> bool:
    """Whether ``target`` gives each sample a distribution over its classes ``[..., C]``:
    one-hot rows (integer or float) or class probabilities (smoothed or mixed labels, as
    ``torch.nn.CrossEntropyLoss`` takes them), next to scores of the same shape or labels
    ``[...]``. Rows that do not sum to 1 (several labels per sample, or per-element 0/1
    targets) are not: they are scored element by element, as before. One-hot rows next to
    logits read both ways: a warning says so, unless ``multi_label=False`` stated it."""
    if target.dim() < 2 or target.shape[-1] < 2 or not target.numel():
        return False
    like_scores = scores.shape == target.shape and (
        scores.is_floating_point() or multi_label is False
    )
    if not like_scores and scores.shape != target.shape[:-1]:
        return False
    if like_scores and multi_label is None and _independent_probabilities(scores):
        return False  # sigmoid outputs: a multi-label batch whose rows hold one label each
    rows = target.double()
    if not (bool((rows >= 0).all()) and bool(((rows.sum(dim=-1) - 1).abs() <= 1e-3).all())):
        return False
    if like_scores and multi_label is None and _ambiguous_one_hot(rows, scores):
        warnings.warn(
            f"ClassificationResults: y_true {tuple(target.shape)} holds one-hot 0/1 rows "
            f"next to logits y_pred {tuple(scores.shape)}: a multi-class batch, or a "
            f"multi-label one whose rows hold one label each, which logits cannot tell "
            f"apart. They are scored as one class per sample (arg-max). State the task: "
            f"ClassificationResults(multi_label=False) for one class per sample (no "
            f"warning), or multi_label=True (or MultiLabelResults) for per-label sigmoid "
            f"outputs, scored label by label with subset accuracy as sklearn.metrics does.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return True


def _ambiguous_one_hot(rows: torch.Tensor, scores: torch.Tensor) -> bool:
    """Whether ``rows`` (float64 targets summing to 1) are 0/1 one-hot rows and ``scores``
    logits (not probabilities in [0, 1]): what a multi-label model could give as well."""
    if not bool(((rows == 0) | (rows == 1)).all()):
        return False  # soft targets (smoothed labels): one class per sample
    values = scores.double()
    return not bool(((values >= 0) & (values <= 1)).all())


def _independent_probabilities(scores: torch.Tensor) -> bool:
    """Whether ``scores`` ``[..., C]`` are probabilities in [0, 1] whose rows do not sum to
    1 (one sigmoid per label, as a multi-label model gives; a softmax's rows sum to 1, even
    in float16 within 1e-2). Logits cannot be told apart: they are read as one class."""
    rows = scores.double()
    if not bool(((rows >= 0) & (rows <= 1)).all()):
        return False
    return bool(((rows.sum(dim=-1) - 1).abs() > 1e-2).any())


def _refuse_multi_hot(scores: torch.Tensor, target: torch.Tensor) -> None:
    """Raise when ``target`` holds several 0/1 labels per sample ``[N, L]`` (rows that are
    not one-hot) next to predictions of the same shape: a multi-label problem, whose
    element-by-element scores would be read as accuracy and F1 of samples."""
    if target.dim() != 2 or target.shape[1] < 2 or scores.shape != target.shape:
        return
    if not target.numel() or not bool(((target == 0) | (target == 1)).all()):
        return
    raise ValueError(
        f"ClassificationResults scores one class per sample, but y_true {tuple(target.shape)} "
        f"holds 0/1 labels per sample (multi-hot rows, or one-hot rows next to per-label "
        f"sigmoid probabilities or 0/1 decisions whose rows do not sum to 1) next to y_pred "
        f"{tuple(scores.shape)}: a multi-label problem. Use "
        f"scramjet.metrics.multilabel.MultiLabelResults, whose "
        f"subset_accuracy and per-label macro/micro F1 match sklearn.metrics; to score "
        f"every label as a separate two-class sample, pass y_pred.reshape(-1) and "
        f"y_true.reshape(-1)."
    )


def _first(mask: torch.Tensor) -> int | tuple[int, ...]:
    """The index of ``mask``'s first True entry, as an error message names it."""
    first = tuple(int(i) for i in mask.nonzero()[0])
    return first[0] if len(first) == 1 else first


def _refuse_nan(scores: torch.Tensor, scored: torch.Tensor, package: str) -> None:
    """Raise when a scored prediction is NaN (``scored``: a mask of ``scores``' rows, or of
    its elements, that count): an arg-max or threshold would turn it into a class."""
    if not scores.is_floating_point():
        return
    nan = scores.isnan()
    while nan.dim() > scored.dim():
        nan = nan.any(dim=-1)
    nan = nan.reshape(scored.shape) & scored
    if bool(nan.any()):
        raise ValueError(
            f"{package}: y_pred holds {int(nan.sum())} NaN score(s) among the predictions "
            f"scored (the first at index {_first(nan)}); a NaN "
            f"has no class, and counting it as one would misreport the model. A model that "
            f"outputs NaN has diverged: lower the learning rate or clip gradients and train "
            f"again, or leave those samples out of y_pred and y_true."
        )


def _refuse_nan_target(target: torch.Tensor) -> None:
    """Raise when float class targets hold a NaN, an infinity or a fraction: as an integer
    it would be a made-up class (NaN reads as -9223372036854775808)."""
    if not target.is_floating_point():
        return
    bad = ~torch.isfinite(target) | (target != target.round())
    if bool(bad.any()):
        first = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"ClassificationResults: y_true holds {int(bad.sum())} value(s) that are not "
            f"class indices (the first, {target[first].item()}, at index {_first(bad)}); "
            f"targets are whole class numbers "
            f"(or one distribution over the classes per sample). Leave samples without a "
            f"label out, or mark them {PAD_VALUE} to skip them."
        )


def _check_labels(values: torch.Tensor, n: int, what: str, package: str) -> None:
    """Raise unless every label of ``values`` is a class index in ``[0, n)``."""
    outside = values[(values < 0) | (values >= n)]
    if outside.numel():
        raise ValueError(
            f"{package}: {what} holds label {int(outside[0])}, outside the {n} classes "
            f"[0, {n - 1}] ({int(outside.numel())} such value(s)). Class labels are indices "
            f"0..num_classes-1 ({PAD_VALUE} marks a target to skip); pass num_classes= the "
            f"model's number of classes, or map the labels to 0..num_classes-1."
        )


def _next_token(scores: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The scores at each position ``t`` with the target at ``t + 1`` (``shift_labels``)."""
    if target.dim() < 2 or scores.dim() < 2 or scores.shape[1] != target.shape[1]:
        raise ValueError(
            f"ClassificationResults(shift_labels=True) scores each position's prediction "
            f"against the next target, so it needs per-token targets [N, T] and scores "
            f"[N, T, C] (or labels [N, T]); received y_pred {tuple(scores.shape)} and y_true "
            f"{tuple(target.shape)}. Pass shift_labels=False for one label per sample."
        )
    return scores[:, :-1], target[:, 1:]


def _one_score_each(pred: torch.Tensor, target: torch.Tensor, package: str) -> torch.Tensor:
    """``pred`` flattened to one value per target, or an error naming both shapes."""
    if pred.numel() != target.numel():
        raise ValueError(
            f"{package} needs one prediction per target; y_pred has shape "
            f"{tuple(pred.shape)} and y_true {tuple(target.shape)}. Pass one score per "
            f"sample (e.g. logits[:, 0] of a one-output model)."
        )
    return pred.reshape(-1)


class ClassificationResults(ResultPackage):
    """Multi-class: accuracy, macro/micro precision, recall and F1, confusion matrix.

    ``y_pred`` is either class scores ``[N, C]`` (arg-maxed) or labels ``[N]``; ``y_true``
    is class indices ``[N]``, or one distribution over the classes per sample ``[N, C]``
    (one-hot rows, or probabilities such as smoothed labels), read as its most likely
    class. Multi-hot targets are refused (see :class:`MultiLabelResults`), and so are one-hot
    ones next to per-label sigmoid probabilities or 0/1 decisions (rows that do not sum to
    1: a multi-label batch whose rows hold one label each); next to logits, which cannot
    tell the two apart, one-hot targets are read as one class per sample with a warning
    unless ``multi_label`` states the task. A binary
    classifier's one score per sample (``[N, 1]``, or ``[N]`` values that are not whole
    numbers) predicts class 1 when it is a probability above 0.5, or a logit above 0
    (values outside [0, 1], as :class:`BinaryResults` reads them). Per-token
    scores ``[N, T, C]`` with targets ``[N, T]`` (token classification) are scored token by
    token; a causal language model's (a Hugging Face ``...ForCausalLM``, whose ``labels``
    are its ``input_ids``) predict the token after each position: pass
    ``shift_labels=True`` to score the scores at ``t`` against the target at ``t + 1``, as
    its own loss does (such a model's output, a ``CausalLMOutput...``, is otherwise scored
    unshifted with a warning). Targets equal to -100 (the padding ``predict`` and
    :meth:`evaluate` add, the ignore index of ``torch.nn.CrossEntropyLoss``) are left out.
    Macro averages are taken
    over the classes that appear in ``y_true`` or in the predictions, as scikit-learn's
    defaults do: a class that neither shows (a fourth column of scores never chosen, or a
    larger ``num_classes``) counts in the confusion matrix but not in the averages.

    Args:
        num_classes: number of classes; default the width ``C`` of class scores
            ``[N, C]`` (a class the data never shows still has its row and column in the
            confusion matrix), or ``max(label) + 1`` over both inputs if that is more, or
            for labels.
        shift_labels: score the scores at ``t`` against the target at ``t + 1`` (True) or
            at ``t`` (False, the default); needs per-token targets ``[N, T]``.
        multi_label: the task, where the inputs leave it open: False for one class per
            sample (one-hot targets ``[N, C]`` are read as classes next to any scores,
            without a warning), True for several 0/1 labels per sample (the results of
            :class:`MultiLabelResults`, threshold 0.5), None (the default) to read it
            from the inputs as above.
        top_k: also report ``top{k}_accuracy`` for each ``k`` (an int or a sequence of
            ints, e.g. ``(1, 5)``): the share of samples whose target is among the ``k``
            highest class scores (ties go to the lower class index). Needs class scores
            ``[N, C]`` (or per token, ``[N, T, C]``) with ``k <= C``; labels cannot be
            ranked, and are refused.

    Example:
        >>> import torch
        >>> ClassificationResults()(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]))["accuracy"]
        0.6666666666666666
    """

    name = "classification"

    def __init__(
        self,
        num_classes: int | None = None,
        shift_labels: bool | None = None,
        multi_label: bool | None = None,
        top_k: int | Sequence[int] | None = None,
    ) -> None:
        self.top_k = _check_top_k(top_k)
        if multi_label not in (None, True, False):
            raise ValueError(
                f"ClassificationResults: multi_label must be None, True or False; received "
                f"{multi_label!r}. Pass multi_label=False for one class per sample, True "
                f"for several 0/1 labels per sample."
            )
        self.num_classes = num_classes
        self.shift_labels = shift_labels
        self.multi_label = multi_label

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """See the class docstring."""
        warn_if_unshifted(y_pred, self.shift_labels, "ClassificationResults")
        scores, target = as_tensor(y_pred, "y_pred"), as_tensor(y_true, "y_true")
        if self.multi_label:
            if self.top_k:
                raise ValueError(
                    "ClassificationResults: top_k ranks the classes of one-class-per-sample "
                    "scores; with multi_label=True each label is its own decision. Drop "
                    "top_k, or pass multi_label=False."
                )
            from scramjet.metrics.multilabel import MultiLabelResults  # imports this module

            return MultiLabelResults().compute(scores, target, metadata)
        if self.shift_labels:
            scores, target = _next_token(scores, target)
        if _class_distributions(target, scores, self.multi_label):  # one-hot or soft [N, C]
            target = target.argmax(dim=-1)
        _refuse_multi_hot(scores, target)
        _refuse_nan_target(target)
        target = target.long()
        if target.dim() > 1 and target.shape[-1] == 1:  # one label per sample, as [N, 1]
            target = target.squeeze(-1)
        pred = _labels(scores, target != PAD_VALUE)
        # class scores [..., C] that were arg-maxed: the model has C classes
        width = scores.shape[-1] if scores.dim() > target.dim() and scores.shape[-1] > 1 else 0
        if pred.shape != target.shape:
            raise ValueError(
                f"y_pred gives {tuple(pred.shape)} labels but y_true has shape {tuple(target.shape)}; "
                f"pass one prediction per target."
            )
        kept = target != PAD_VALUE
        _refuse_nan(scores, kept, "ClassificationResults")
        pred, target = pred[kept], target[kept]
        if not target.numel():
            raise ValueError(
                f"y_true holds no target to score (every one is the padding value "
                f"{PAD_VALUE}, or it is empty); pass the targets of the predicted samples."
            )
        n = self.num_classes or max(width, int(max(int(pred.max()), int(target.max())) + 1))
        _check_labels(target, n, "y_true", "ClassificationResults")
        _check_labels(pred, n, "y_pred", "ClassificationResults")
        out = multiclass_metrics(pred, target, n)
        if self.top_k:
            ranked = scores[kept] if width else None
            out.update(_top_k_accuracy(ranked, target, self.top_k))
        return out


def _check_top_k(top_k: int | Sequence[int] | None) -> tuple[int, ...]:
    """``top_k`` as a tuple of distinct positive ints, in the order given."""
    if top_k is None:
        return ()
    values = (top_k,) if isinstance(top_k, int) else top_k
    if (
        isinstance(values, str | bytes)
        or not isinstance(values, Sequence)
        or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in values)
    ):
        raise ValueError(
            f"ClassificationResults: top_k must be a positive int or a sequence of them "
            f"(e.g. top_k=(1, 5)); received {top_k!r}."
        )
    return tuple(dict.fromkeys(values))


def _top_k_accuracy(
    scores: torch.Tensor | None, target: torch.Tensor, top_k: tuple[int, ...]
) -> dict[str, float]:
    """``top{k}_accuracy`` for each ``k``: the share of targets among the ``k`` highest
    scores of their sample (a stable sort: ties go to the lower class index)."""
    if scores is None:
        raise ValueError(
            "ClassificationResults: top_k needs class scores [N, C] (logits or "
            "probabilities) to rank; y_pred holds one label per sample. Pass the model's "
            "scores, or drop top_k."
        )
    width = scores.shape[-1]
    if max(top_k) > width:
        raise ValueError(
            f"ClassificationResults: top_k={max(top_k)} is more than the {width} classes "
            f"of y_pred's scores; pass k <= {width}."
        )
    order = torch.sort(scores.double(), dim=-1, descending=True, stable=True).indices
    hit_at = (order == target.unsqueeze(-1)).long().argmax(dim=-1)  # the target's rank
    return {f"top{k}_accuracy": float((hit_at < k).double().mean()) for k in top_k}


class BinaryResults(ResultPackage):
    """Binary: accuracy, ROC-AUC, PR-AUC (average precision), F1.

    ``y_pred`` are scores: probabilities in [0, 1], or logits (values outside [0, 1]
    are passed through a sigmoid, as torchmetrics does), one per sample. Two scores per
    sample ``[N, 2]`` (a two-class model trained with cross-entropy) are scored by the
    positive class's probability: rows in [0, 1] that sum to 1 are probabilities and their
    second column is taken as it is; other rows are logits, through a softmax. Labels are 0/1 (integers, floats or booleans); targets
    equal to -100 (the padding ``predict`` and :meth:`evaluate` add) are left out. ROC-AUC
    is NaN when the targets hold one class only, and PR-AUC when they hold no positive:
    both are undefined there (each with a warning).

    Logits that all happen to lie in [0, 1] (an untrained model's, say) cannot be told from
    probabilities: pass ``scores="logits"`` when the model outputs logits (they then always
    go through a sigmoid), or ``scores="probabilities"`` to have values outside [0, 1]
    refused rather than read as logits.

    Args:
        threshold: probability above which a prediction counts as positive.
        scores: what one score per sample is: ``"auto"`` (the default: read from its
            values, as above), ``"logits"`` or ``"probabilities"``.
    """

    name = "binary"

    def __init__(
        self,
        threshold: float = 0.5,
        scores: Literal["auto", "logits", "probabilities"] = "auto",
    ) -> None:
        check_scores_kind("BinaryResults", scores)
        self.threshold = threshold
        self.scores = scores

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """See the class docstring."""
        pred, target, order = self._scores_labels_order(y_pred, y_true)
        counts = binary_counts(decisions(pred, self.threshold), target)
        return {
            "accuracy": counts["accuracy"],
            "roc_auc": _defined_or_nan(roc_auc, order, target, "ROC-AUC", both=True),
            "pr_auc": _defined_or_nan(average_precision, order, target, "PR-AUC", both=False),
            "f1": counts["f1"],
        }

    def scores_and_labels(self, y_pred: Any, y_true: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The positive-class probabilities and 0/1 labels the results are computed from:
        two scores per sample through a softmax, logits through a sigmoid, padding left out."""
        pred, target, _ = self._scores_labels_order(y_pred, y_true)
        return pred, target

    def _scores_labels_order(
        self, y_pred: Any, y_true: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`scores_and_labels`, and the scores' ranks in [0, 1] that ROC-AUC and PR-AUC
        are computed from: taken from the scores as given (a logit, or the margin of two), not
        from probabilities, which round to 1.0 in float32 for logits above ~17 and so would
        tie a confident model's best samples."""
        raw = as_tensor(y_pred, "y_pred")
        target = as_tensor(y_true, "y_true")
        # float64 scores stay float64: a probability within float32 rounding of the
        # threshold keeps its side of it
        pred = raw.double() if raw.dtype == torch.float64 else raw.float()
        two_scores = pred.dim() == 2 and pred.shape[1] == 2 and pred.shape[0] == target.numel()
        keys = raw.double()
        if two_scores:
            rows = target.reshape(-1) != PAD_VALUE
            if self.scores == "logits" or not self._two_probabilities(pred, rows):
                pred = pred.softmax(dim=-1)
            pred, keys = pred[:, 1], keys[:, 1] - keys[:, 0]
        pred, target = _one_score_each(pred, target, "BinaryResults"), target.reshape(-1)
        kept = target != PAD_VALUE
        _refuse_nan(pred, kept, "BinaryResults")
        if not two_scores:
            pred = self._as_probabilities(pred, kept)
        return pred[kept], _binary_labels(target[kept]), _ranks(keys.reshape(-1)[kept])

    def _two_probabilities(self, pred: torch.Tensor, rows: torch.Tensor) -> bool:
        """Whether two scores per sample ``[N, 2]`` are already class probabilities (rows
        in [0, 1] that sum to 1), taken as they are; else they are logits (softmax)."""
        scored = pred[rows]
        if self.scores == "probabilities":
            check_probabilities("BinaryResults", scored)
            return True
        in_range = bool(((scored >= 0) & (scored <= 1)).all())
        return in_range and bool(((scored.double().sum(dim=-1) - 1).abs() <= 1e-3).all())

    def _as_probabilities(self, pred: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
        """``pred`` through a sigmoid when they are logits; checked when probabilities."""
        if self.scores == "logits":
            return pred.sigmoid()
        if self.scores == "probabilities":
            check_probabilities("BinaryResults", pred[kept])
        return pred


def check_scores_kind(owner: str, scores: str) -> None:
    """Refuse a ``scores=`` other than ``"auto"``, ``"logits"`` or ``"probabilities"``."""
    if scores not in ("auto", "logits", "probabilities"):
        raise ValueError(
            f"{owner}: scores must be 'auto', 'logits' or 'probabilities'; "
            f"received {scores!r}. Pass scores='logits' for a model's raw outputs."
        )


def check_probabilities(owner: str, pred: torch.Tensor) -> None:
    """Refuse scores stated as probabilities that hold values outside [0, 1]."""
    outside = pred[(pred < 0) | (pred > 1)]
    if outside.numel():
        raise ValueError(
            f"{owner}(scores='probabilities'): y_pred holds {int(outside.numel())} "
            f"value(s) outside [0, 1] (the first: {float(outside[0])}). Pass "
            f"scores='logits' if the model outputs logits, or apply its sigmoid first."
        )


def _ranks(scores: torch.Tensor) -> torch.Tensor:
    """``scores`` replaced by their dense ranks scaled to [0, 1] (float64): the same order
    and ties, so the same ROC-AUC and average precision, with no value a sigmoid rounds."""
    if not scores.numel():
        return scores
    inverse: torch.Tensor = torch.unique(scores, return_inverse=True)[1]
    return inverse.double() / max(int(inverse.max()), 1)


def _binary_labels(target: torch.Tensor) -> torch.Tensor:
    """0/1 targets as integers, or an error naming the first other value."""
    if not target.numel():
        raise ValueError(
            f"BinaryResults: y_true holds no target to score (it is empty, or every one is "
            f"the padding value {PAD_VALUE}); pass the targets of the predicted samples."
        )
    other = target[(target != 0) & (target != 1)]
    if other.numel():
        raise ValueError(
            f"BinaryResults: targets must be 0 or 1; y_true holds {other[0].item()} "
            f"({int(other.numel())} value(s) other than 0 and 1). For more than two classes "
            f"use ClassificationResults; for soft or smoothed targets pass the hard labels "
            f"(e.g. (y_true > 0.5).long())."
        )
    return target.long()


def _defined_or_nan(
    metric: Callable[[torch.Tensor, torch.Tensor], float],
    pred: torch.Tensor,
    target: torch.Tensor,
    label: str,
    both: bool,
) -> float:
    """``metric`` of the scores, or NaN with a warning when the targets lack a class it
    needs: ROC-AUC needs both classes (``both``), average precision a positive."""
    positives = int(target.sum())
    if positives and (not both or positives < target.numel()):
        return metric(pred, target)
    held = "no positive" if not positives else "no negative"
    warnings.warn(
        f"BinaryResults: {label} is undefined when the targets hold {held} (all "
        f"{target.numel()} are {int(bool(positives))}); it is reported as NaN. Score a "
        f"split that holds both classes.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return math.nan


class RegressionResults(ResultPackage):
    """Regression: MSE, MAE and R² (NaN for fewer than two samples: it is undefined).

    Targets ``[N, k]`` with predictions of the same shape are ``k`` outputs of ``N``
    samples: R² is the mean of the per-output R², as ``sklearn.metrics.r2_score`` gives by
    default, and NaN when ``N`` is 1 (MSE and MAE are the same pooled or per output).
    NaN predictions or targets are refused, as ``sklearn.metrics`` refuses them. A list of
    equal-shape tensors is joined as ``_join_pieces`` reads it (batches or per-sample rows,
    told by the other argument's shape); two such lists of 1-d tensors are ambiguous and
    refused, naming ``torch.cat`` and ``torch.stack``.
    """

    name = "regression"

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """See the class docstring."""
        _refuse_ragged(y_pred, "y_pred")
        _refuse_ragged(y_true, "y_true")
        y_pred, y_true = (
            _join_pieces(y_pred, y_true, "y_pred"),
            _join_pieces(y_true, y_pred, "y_true"),
        )
        # float64: in float32, targets far from 0 (prices, years) lose R² to cancellation
        pred = as_tensor(_float64_numbers(y_pred), "y_pred").double()
        target = as_tensor(_float64_numbers(y_true), "y_true").double()
        _check_regression_shapes(pred, target)
        columns = target.shape[1] if target.dim() == 2 and pred.shape == target.shape else 1
        pred, target = _one_score_each(pred, target, "RegressionResults"), target.reshape(-1)
        if not target.numel():
            raise ValueError(
                "RegressionResults: y_pred and y_true are empty; pass the predictions and "
                "targets of the evaluated samples."
            )
        diverged = "a model that outputs NaN has diverged: lower the learning rate and train again"
        _refuse_nan_values(pred, "y_pred", diverged)
        _refuse_nan_values(
            target, "y_true", "a NaN target is a missing value: leave that sample out"
        )
        return {
            "mse": float(R.mean_squared_error(pred, target)),
            "mae": float(R.mean_absolute_error(pred, target)),
            "r2": _r2(pred, target, columns),
        }


def _refuse_ragged(value: Any, what: str) -> None:
    """Raise when ``value`` is a list of tensors or arrays of different lengths (batches,
    the last one smaller): padded to one tensor with -100, the padding would be scored."""
    if not isinstance(value, list) or len(value) < 2:
        return
    shapes = {tuple(item.shape) for item in value if hasattr(item, "shape")}
    if len(shapes) < 2:
        return
    raise ValueError(
        f"RegressionResults: {what} is a list of {len(value)} tensors or arrays of "
        f"different shapes ({', '.join(map(str, sorted(shapes)[:3]))}); padded to one "
        f"tensor with {PAD_VALUE}, the padding would be scored as values. If they are "
        f"batches, pass torch.cat({what}) (and the targets joined the same way)."
    )


def _float64_numbers(value: Any) -> Any:
    """A (nested) list of Python numbers as a float64 array, as scikit-learn reads it
    (``torch.as_tensor`` would make it float32, losing the decimals of values ~1e6);
    anything else (tensors, arrays, lists of them, ragged lists) as it is."""
    if not isinstance(value, list) or not value:
        return value
    items = [row for item in value for row in (item if isinstance(item, list) else [item])]
    if not all(isinstance(item, int | float) and not isinstance(item, bool) for item in items):
        return value
    try:
        return np.asarray(value, dtype=np.float64)
    except ValueError:  # ragged rows: as_tensor pads them
        return value


def _pieces_shape(value: Any) -> tuple[int, ...] | None:
    """The one shape of a list of two or more tensors or arrays, or None for anything else
    (lists of numbers, one-item lists, shapes that differ: see ``_refuse_ragged``)."""
    if not isinstance(value, list) or len(value) < 2:
        return None
    if not all(isinstance(item, torch.Tensor | np.ndarray) for item in value):
        return None
    shapes = {tuple(item.shape) for item in value}
    return shapes.pop() if len(shapes) == 1 else None


def _join_pieces(value: Any, other: Any, what: str) -> Any:
    """``value``, a list of equal-shape tensors or arrays, as one tensor: batches ``[B, ...]``
    are joined with ``torch.cat``; 1-d pieces ``[L]`` are per-sample rows of ``L`` outputs
    (``torch.stack``) when ``other`` is ``[len(value), L]``, batches when ``other`` holds
    ``len(value) * L`` values in one column, and ambiguous (an error) when ``other`` is a
    list of such pieces too. Anything else is returned as it is."""
    shape = _pieces_shape(value)
    if shape is None or len(shape) == 0 or shape == (1,):
        return value
    tensors = [torch.as_tensor(item) for item in value]
    if len(shape) >= 2:  # a per-sample row is 1-d: these are batches
        return torch.cat(tensors)
    if isinstance(other, torch.Tensor | np.ndarray):
        if tuple(other.shape) == (len(value), shape[0]):
            return torch.stack(tensors)
        if _without_last_one(torch.Size(other.shape)) == (len(value) * shape[0],):
            return torch.cat(tensors)
        return value
    if _pieces_shape(other) is None:
        return value
    raise ValueError(
        f"RegressionResults: {what} is a list of {len(value)} tensors of shape {shape}, "
        f"which reads two ways: {len(value)} batches of {shape[0]} samples, or "
        f"{len(value)} samples of {shape[0]} outputs each. Join both lists yourself: "
        f"torch.cat(y_pred) and torch.cat(y_true) for batches, torch.stack(y_pred) and "
        f"torch.stack(y_true) for per-sample rows."
    )


def _without_last_one(shape: torch.Size) -> tuple[int, ...]:
    """``shape`` without a trailing dimension of size 1 (one output per sample, ``[N, 1]``)."""
    return tuple(shape[:-1]) if len(shape) > 1 and shape[-1] == 1 else tuple(shape)


def _check_regression_shapes(pred: torch.Tensor, target: torch.Tensor) -> None:
    """Raise unless ``pred`` and ``target`` hold the same values per sample: equal shapes,
    or equal but for a trailing dimension of size 1 (``[N]`` against ``[N, 1]``)."""
    if _without_last_one(pred.shape) == _without_last_one(target.shape):
        return
    raise ValueError(
        f"RegressionResults needs one prediction per target, laid out alike; y_pred has "
        f"shape {tuple(pred.shape)} and y_true {tuple(target.shape)}, which would pair "
        f"predictions with other samples' or outputs' targets. Pass both as [N] (one "
        f"output) or both as [N, k] (k outputs per sample): reshape the one that is "
        f"flattened, or transpose the one that is [k, N]."
    )


def _refuse_nan_values(values: torch.Tensor, what: str, cause: str) -> None:
    """Raise when flat ``values`` hold a NaN, which would make every metric NaN."""
    nan = values.isnan()
    if bool(nan.any()):
        raise ValueError(
            f"RegressionResults: {what} holds {int(nan.sum())} NaN value(s) (the first at "
            f"index {int(nan.nonzero()[0, 0])} of the flattened values), which would make "
            f"MSE, MAE and R² NaN; {cause}."
        )


def _r2(pred: torch.Tensor, target: torch.Tensor, columns: int) -> float:
    """R² of flat values, or the mean R² of ``columns`` outputs laid out row by row; NaN
    for fewer than two samples (one row of ``columns`` outputs is one sample)."""
    if target.numel() // columns < 2:
        return math.nan
    # Centred sums in float64, as sklearn.metrics.r2_score: torchmetrics' sum(y^2) -
    # sum(y)^2 / n cancels every digit for targets ~1e8 with a spread of a few units.
    pred, target = pred.reshape(-1, columns), target.reshape(-1, columns)
    rss = ((target - pred) ** 2).sum(dim=0)
    tss = ((target - target.mean(dim=0)) ** 2).sum(dim=0)
    # a constant output scores 1 when predicted exactly, else 0 (sklearn's force_finite)
    per_output = torch.where(tss > 0, 1 - rss / tss.clamp_min(1e-300), (rss == 0).double())
    return float(per_output.mean())
