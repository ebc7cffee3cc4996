"""``PyTorchModelPredictor``: predictions, loss and result packages of a trained model on one loader."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import nn

from scramjet.compat.aitoolbox.torchtrain.train_loop.train_loop import TrainLoop

__all__ = ["PyTorchModelPredictor"]


class PyTorchModelPredictor:
    """Runs a ``TTModel`` (or ``ModelWrap``) over ``data_loader`` without training it.

    Predictions and losses go through the same Trainer hooks as in training (a
    :class:`TrainLoop` without optimizer).

    Args:
        model: a ``TTModel`` or a ``ModelWrap``.
        data_loader: a DataLoader or any iterable of batches.
        callbacks: callbacks whose ``on_after_batch_prediction`` sees each predicted batch.
    """

    def __init__(
        self, model: nn.Module | Any, data_loader: Any, callbacks: Iterable[Any] | None = None
    ) -> None:
        self.data_loader = data_loader
        self.train_loop = TrainLoop(model, None, None, None, None, None)
        self.train_loop.callbacks_handler.register_callbacks(callbacks)
        self.model = self.train_loop.model

    def model_predict(self) -> tuple[Any, Any, Any]:
        """``(y_pred, y_true, metadata)`` over the loader."""
        return self.train_loop.predict_with_model(
            self.data_loader, execute_callbacks=True, dataset_info={"type": "prediction"}
        )

    def model_get_loss(self, loss_criterion: Any) -> Any:
        """Mean loss per sample over the loader (``get_loss_eval`` if the model has it)."""
        self.train_loop.criterion = loss_criterion
        return self.train_loop._trainer().loss_on(self.data_loader)

    def evaluate_result_package(
        self, result_package: Any, return_result_package: bool = True
    ) -> Any:
        """Compute ``result_package`` on the loader's predictions (the metadata as additional results).

        Returns:
            The package, or its results dict with ``return_result_package=False``.
        """
        y_pred, y_true, metadata = self.model_predict()
        result_package.prepare_result_package(
            y_true, y_pred, hyperparameters={}, additional_results=metadata
        )
        return result_package if return_result_package else result_package.get_results()

    def execute_batch_end_callbacks(self) -> None:
        """Run the callbacks' ``on_batch_end``."""
        self.train_loop.callbacks_handler.execute_batch_end()

    def execute_epoch_end_callbacks(self) -> None:
        """Run the callbacks' ``on_epoch_end``."""
        self.train_loop.callbacks_handler.execute_epoch_end()
