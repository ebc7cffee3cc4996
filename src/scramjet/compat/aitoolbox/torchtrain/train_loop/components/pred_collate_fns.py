"""How per-batch predictions are collected (``collate_batch_pred_fn``) and joined (``pred_transform_fn``)."""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "append_concat_predictions",
    "append_predictions",
    "keep_list_transf",
    "torch_cat_transf",
]


def append_predictions(y_batch: Any, predictions: list[Any]) -> list[Any]:
    """Append one batch's predictions to ``predictions`` as one element."""
    predictions.append(y_batch)
    return predictions


def append_concat_predictions(y_batch: Any, predictions: list[Any]) -> list[Any]:
    """Extend ``predictions`` with a list batch; append any other batch (array, tensor) whole."""
    if isinstance(y_batch, list):
        predictions.extend(y_batch)
    else:
        predictions.append(y_batch)
    return predictions


def torch_cat_transf(predictions: list[torch.Tensor]) -> torch.Tensor:
    """Concatenate per-batch tensors along the first dimension."""
    return torch.cat(predictions)


def keep_list_transf(predictions: list[Any]) -> list[Any]:
    """Keep the collected predictions as they are."""
    return predictions
