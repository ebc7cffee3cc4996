"""Classification, binary classification and regression result packages (torchmetrics)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torchmetrics.functional import classification as C
from torchmetrics.functional import regression as R

from scramjet.metrics.base import ResultPackage, as_tensor


def _labels(y_pred: torch.Tensor) -> torch.Tensor:
    # Scores/logits of shape [N, C] → predicted class; labels pass through.
    return y_pred.argmax(dim=-1) if y_pred.dim() > 1 else y_pred.long()


class ClassificationResults(ResultPackage):
    """Multi-class: accuracy, macro/micro precision, recall and F1, confusion matrix.

    ``y_pred`` is either class scores ``[N, C]`` (arg-maxed) or labels ``[N]``.

    Args:
        num_classes: number of classes; default ``max(label) + 1`` over both inputs.

    Example:
        >>> import torch
        >>> ClassificationResults()(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]))["accuracy"]
        0.6666666865348816
    """

    name = "classification"

    def __init__(self, num_classes: int | None = None) -> None:
        self.num_classes = num_classes

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """See the class docstring."""
        pred, target = _labels(as_tensor(y_pred, "y_pred")), as_tensor(y_true, "y_true").long()
        if pred.shape != target.shape:
            raise ValueError(
                f"y_pred gives {tuple(pred.shape)} labels but y_true has shape {tuple(target.shape)}; "
                f"pass one prediction per target."
            )
        n = self.num_classes or int(max(int(pred.max()), int(target.max())) + 1)
        out: dict[str, Any] = {
            "accuracy": float(C.multiclass_accuracy(pred, target, n, average="micro"))
        }
        for avg in ("macro", "micro"):
            out[f"precision_{avg}"] = float(C.multiclass_precision(pred, target, n, average=avg))
            out[f"recall_{avg}"] = float(C.multiclass_recall(pred, target, n, average=avg))
            out[f"f1_{avg}"] = float(C.multiclass_f1_score(pred, target, n, average=avg))
        out["confusion_matrix"] = C.multiclass_confusion_matrix(pred, target, n).tolist()
        return out


class BinaryResults(ResultPackage):
    """Binary: accuracy, ROC-AUC, PR-AUC (average precision), F1.

    ``y_pred`` are scores: probabilities in [0, 1], or logits (values outside [0, 1]
    are passed through a sigmoid, as torchmetrics does). Labels are 0/1.

    Args:
        threshold: probability above which a prediction counts as positive.
    """

    name = "binary"

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """See the class docstring."""
        pred = as_tensor(y_pred, "y_pred").float().reshape(-1)
        target = as_tensor(y_true, "y_true").long().reshape(-1)
        t = self.threshold
        return {
            "accuracy": float(C.binary_accuracy(pred, target, threshold=t)),
            "roc_auc": float(C.binary_auroc(pred, target)),
            "pr_auc": float(C.binary_average_precision(pred, target)),
            "f1": float(C.binary_f1_score(pred, target, threshold=t)),
        }


class RegressionResults(ResultPackage):
    """Regression: MSE, MAE and R²."""

    name = "regression"

    def compute(
        self, y_pred: Any, y_true: Any, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """See the class docstring."""
        pred = as_tensor(y_pred, "y_pred").float().reshape(-1)
        target = as_tensor(y_true, "y_true").float().reshape(-1)
        return {
            "mse": float(R.mean_squared_error(pred, target)),
            "mae": float(R.mean_absolute_error(pred, target)),
            "r2": float(R.r2_score(pred, target)),
        }
