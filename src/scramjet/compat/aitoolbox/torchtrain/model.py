"""``TTModel`` and friends: modules that say how a batch becomes a loss and predictions."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator
from typing import Any

from torch import nn

__all__ = ["ModelWrap", "MultiGPUModelWrap", "TTBasicModel", "TTModel", "route_forward"]


class TTModel(nn.Module, abc.ABC):
    """Base class of models trained by the ``TrainLoop`` family.

    Implement ``forward`` as usual, plus:

    - ``get_loss(batch, criterion, device)`` → loss of a training batch (a scalar tensor,
      or a ``MultiLoss``);
    - ``get_predictions(batch, device)`` → ``(y_pred, y_true, metadata)`` for evaluation
      (``metadata`` may be None or a dict of per-sample lists);
    - optionally ``get_loss_eval(batch, criterion, device)`` for evaluation losses.

    A subclass missing ``get_loss`` or ``get_predictions`` cannot be instantiated.
    Under DistributedDataParallel ``get_loss`` is routed through the wrapper's forward,
    so gradients are synchronised as they are for ``forward``.
    """

    @abc.abstractmethod
    def get_loss(self, batch_data: Any, criterion: Any, device: Any) -> Any:
        """Loss for one training batch."""

    def get_loss_eval(self, batch_data: Any, criterion: Any, device: Any) -> Any:
        """Loss for one evaluation batch: ``get_loss`` unless overridden."""
        return self.get_loss(batch_data, criterion, device)

    @abc.abstractmethod
    def get_predictions(self, batch_data: Any, device: Any) -> Any:
        """``(predictions, targets, metadata)`` for one evaluation batch."""


class TTBasicModel(TTModel):
    """A ``TTModel`` for batches ``[input_1, ..., input_n, targets]``: ``model(*inputs)`` vs targets.

    ``get_loss`` moves every element to the device; ``get_predictions`` leaves the targets
    where they are and returns ``(model(*inputs), targets, {})``.
    """

    def get_loss(self, batch_data: Any, criterion: Any, device: Any) -> Any:
        """``criterion(model(*inputs), targets)`` with the whole batch on ``device``."""
        *inputs, targets = (x.to(device) for x in batch_data)
        return criterion(self(*inputs), targets)

    def get_predictions(self, batch_data: Any, device: Any) -> Any:
        """``(model(*inputs), targets, {})``: inputs on ``device``, targets on the CPU."""
        *inputs, targets = batch_data
        return self(*(x.to(device) for x in inputs)), targets.cpu(), {}


class ModelWrap:
    """A plain ``nn.Module`` with a batch feed definition that computes its loss and predictions.

    Args:
        model: the module that is trained (``TrainLoop.fit`` returns it).
        batch_model_feed_def: an ``AbstractModelFeedDefinition`` with
            ``get_loss(model, batch, criterion, device)``,
            ``get_loss_eval(model, batch, criterion, device)`` and
            ``get_predictions(model, batch, device)``.
    """

    def __init__(self, model: nn.Module, batch_model_feed_def: Any) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module; received {type(model).__name__}.")
        self.model = model
        self.batch_model_feed_def = batch_model_feed_def


class MultiGPUModelWrap(ModelWrap):
    """A ``ModelWrap`` whose module is already wrapped for several GPUs (kept for compatibility)."""


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
