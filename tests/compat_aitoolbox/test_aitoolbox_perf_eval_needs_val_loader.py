"""ModelPerformanceEvaluation on validation data needs a validation loader, checked up front."""

from __future__ import annotations

import pytest
import torch
from aitb_helpers import MyNeuralModel, dataset
from torch.utils.data import DataLoader

from scramjet.callbacks import CallbackError
from scramjet.compat.aitoolbox import (
    AbstractCallback,
    ClassificationResultPackage,
    TrainLoop,
)
from scramjet.compat.aitoolbox.torchtrain.callbacks.performance_eval import (
    ModelPerformanceEvaluation,
)


class _CountBatches(AbstractCallback):
    def __init__(self) -> None:
        super().__init__("count batches")
        self.batches = 0

    def on_batch_end(self) -> None:
        self.batches += 1


def _loop(with_val: bool) -> TrainLoop:
    model = MyNeuralModel()
    val = DataLoader(dataset(16, 1), batch_size=8) if with_val else None
    return TrainLoop(
        model,
        DataLoader(dataset(32, 0), batch_size=8),
        val,
        None,
        torch.optim.SGD(model.parameters(), lr=0.1),
        torch.nn.CrossEntropyLoss(),
    )


def test_missing_validation_loader_fails_before_any_training_step() -> None:
    counter = _CountBatches()
    evaluation = ModelPerformanceEvaluation(ClassificationResultPackage(), {})
    with pytest.raises(CallbackError, match="validation_loader is None") as info:
        _loop(with_val=False).fit(num_epochs=2, callbacks=[counter, evaluation])
    assert isinstance(info.value.__cause__, ValueError)
    assert "on_val_data=False" in str(info.value)  # says how to fix it
    assert counter.batches == 0


def test_train_data_only_needs_no_validation_loader() -> None:
    evaluation = ModelPerformanceEvaluation(
        ClassificationResultPackage(), {}, on_train_data=True, on_val_data=False
    )
    loop = _loop(with_val=False)
    loop.fit(num_epochs=1, callbacks=[evaluation])
    assert len(loop.train_history["train_Accuracy"]) == 1


def test_with_validation_loader_evaluates() -> None:
    loop = _loop(with_val=True)
    loop.fit(
        num_epochs=1, callbacks=[ModelPerformanceEvaluation(ClassificationResultPackage(), {})]
    )
    assert len(loop.train_history["val_Accuracy"]) == 1
