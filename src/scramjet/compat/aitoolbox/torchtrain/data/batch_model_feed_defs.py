"""``AbstractModelFeedDefinition``: how a plain module computes a batch's loss and predictions."""

from __future__ import annotations

import abc
from typing import Any

__all__ = ["AbstractModelFeedDefinition"]


class AbstractModelFeedDefinition(abc.ABC):
    """Loss and predictions of a plain ``nn.Module`` (used through ``ModelWrap``)."""

    @abc.abstractmethod
    def get_loss(self, model: Any, batch_data: Any, criterion: Any, device: Any) -> Any:
        """Loss of one training batch."""

    def get_loss_eval(self, model: Any, batch_data: Any, criterion: Any, device: Any) -> Any:
        """Loss of one evaluation batch: :meth:`get_loss` unless overridden."""
        return self.get_loss(model, batch_data, criterion, device)

    @abc.abstractmethod
    def get_predictions(self, model: Any, batch_data: Any, device: Any) -> Any:
        """``(y_pred, y_true, metadata)`` of one batch."""
