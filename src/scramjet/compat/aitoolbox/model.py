"""``TTModel``: an ``nn.Module`` that says how a batch becomes a loss and predictions."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


class TTModel(nn.Module):
    """Base class of models trained by the ``TrainLoop`` family.

    Implement ``forward`` as usual, plus:

    - ``get_loss(batch, criterion, device)`` → scalar loss tensor for a training batch;
    - ``get_predictions(batch, device)`` → ``(y_pred, y_true, metadata)`` for evaluation
      (``metadata`` may be None or a dict of per-sample lists).

    Under DistributedDataParallel ``get_loss`` is routed through the DDP wrapper's
    forward, so gradients are synchronised as they are for ``forward``.
    """

    def get_loss(self, batch_data: Any, criterion: Any, device: torch.device) -> torch.Tensor:
        """Loss for one training batch."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement get_loss(batch_data, criterion, device)."
        )

    def get_predictions(self, batch_data: Any, device: torch.device) -> tuple[Any, Any, Any]:
        """``(predictions, targets, metadata)`` for one evaluation batch."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement get_predictions(batch_data, device)."
        )


@contextlib.contextmanager
def route_forward(module: nn.Module, method: Any) -> Iterator[None]:
    """Make the next ``module(...)`` call inside the block call ``method`` instead of ``forward``.

    DDP only registers its gradient all-reduce for calls that go through the wrapper's
    ``forward``; shadowing the wrapped module's ``forward`` with ``get_loss`` keeps that
    machinery for a loss computed by a custom method.
    """

    def once(*args: Any, **kwargs: Any) -> Any:
        # Restore the real forward first: get_loss usually calls self(...) itself.
        module.__dict__.pop("forward", None)
        return method(*args, **kwargs)

    module.forward = once
    try:
        yield
    finally:
        module.__dict__.pop("forward", None)


def default_get_loss(
    model: nn.Module, batch: Any, criterion: Any, device: torch.device
) -> torch.Tensor:
    """Loss for a plain ``nn.Module``: ``criterion(model(batch[0]), batch[1])``."""
    xb, yb = batch[0].to(device), batch[1].to(device)
    loss: torch.Tensor = criterion(model(xb), yb)
    return loss


def default_get_predictions(
    model: nn.Module, batch: Any, device: torch.device
) -> tuple[Any, Any, Any]:
    """Predictions for a plain ``nn.Module``: ``(model(batch[0]), batch[1], None)``."""
    return model(batch[0].to(device)).cpu(), batch[1].cpu(), None


#: DataParallel is superseded by DistributedDataParallel; see ``TrainLoop(gpu_mode=...)``.
TTDataParallel = nn.DataParallel
