"""A practitioner moving an existing training setup onto the Trainer: overridden hooks,
callbacks that read and steer the run, values logged from both, other data evaluated in
the middle of a run, and result packages on unusual targets."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.metrics import ClassificationResults


def _data(n: int = 32, seed: int = 0) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 5, generator=generator)
    return TensorDataset(x, (x[:, 0] > 0).long())


def _dropout_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.5), nn.Linear(8, 2))


def _trainer(model: nn.Module, callbacks: list[TrainerCallback]) -> Trainer:
    return Trainer(
        model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), callbacks
    )


# ---------------------------------------------------------------- evaluate() inside a run
class _HoldoutAfterFirstUpdate(TrainerCallback):
    """Evaluates other data with ``trainer.evaluate`` after update 1, records the model's
    mode at every training step, and logs a value in every later step."""

    def __init__(self, holdout: TensorDataset) -> None:
        self.holdout, self.modes = holdout, []

    def on_train_step_start(self, trainer: Trainer, **kwargs: object) -> None:
        self.modes.append(trainer.model.training)

    def on_train_step_end(self, trainer: Trainer, **kwargs: object) -> None:
        trainer.log("per_step_value", 1.0)

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: object) -> None:
        if trainer.state.global_step == 1:
            trainer.evaluate(self.holdout, per_device_batch_size=4)


def test_evaluate_called_mid_epoch_leaves_the_rest_of_the_epoch_in_training_mode() -> None:
    holdout = _HoldoutAfterFirstUpdate(_data(8, seed=1))
    trainer = _trainer(_dropout_net(), [holdout])
    trainer.train(_data(32), num_epochs=1, per_device_batch_size=8)
    assert trainer.run_history.get_metric_values("eval_loss_epoch")  # the holdout was scored
    assert holdout.modes == [True, True, True, True]  # dropout stays on after it
    # the training batches after the holdout still log per step (no tracker: dropped)
    assert "per_step_value" not in trainer.run_history.get_metric_names()


# ---------------------------------------------------------------- trainer.log: step or epoch
class _LogsOutsideTheBatches(TrainerCallback):
    def on_train_epoch_start(self, trainer: Trainer, **kwargs: object) -> None:
        trainer.log("lr_at_epoch_start", trainer.optimizer.param_groups[0]["lr"])

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: object) -> None:
        trainer.log("eval_twice", 2 * trainer.run_history.get_latest_metric("eval_loss_epoch"))


def test_a_value_logged_at_the_start_of_a_training_epoch_is_an_epoch_value() -> None:
    trainer = _trainer(_dropout_net(), [_LogsOutsideTheBatches()])
    trainer.train(_data(16), num_epochs=2, per_device_batch_size=8)
    assert trainer.run_history.get_metric_values("lr_at_epoch_start") == [0.1, 0.1]


def test_a_value_logged_in_the_evaluation_is_kept_when_train_and_eval_share_a_loader() -> None:
    loader = DataLoader(_data(16), batch_size=8)
    trainer = _trainer(_dropout_net(), [_LogsOutsideTheBatches()])
    trainer.train(loader, num_epochs=2, eval_dataset=loader)  # overfit-one-set sanity check
    eval_losses = trainer.run_history.get_metric_values("eval_loss_epoch")
    logged = trainer.run_history.get_metric_values("eval_twice")
    assert logged == pytest.approx([2 * v for v in eval_losses])


# ---------------------------------------------------------------- result packages
def _ten_class_scores() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(100, 10, generator=generator), torch.randint(
        0, 10, (100,), generator=generator
    )


@pytest.mark.parametrize("dtype", [torch.long, torch.float32])
def test_classification_results_read_one_hot_targets_as_classes(dtype: torch.dtype) -> None:
    scores, labels = _ten_class_scores()
    one_hot = nn.functional.one_hot(labels, 10).to(dtype)
    assert ClassificationResults()(scores, one_hot) == ClassificationResults()(scores, labels)


def test_classification_results_read_soft_targets_by_their_most_likely_class() -> None:
    scores, labels = _ten_class_scores()
    soft = nn.functional.one_hot(labels, 10).float() * 0.9 + 0.01  # label smoothing
    assert ClassificationResults()(scores, soft) == ClassificationResults()(scores, labels)


def test_classification_results_give_every_class_of_the_scores_a_confusion_row() -> None:
    scores, labels = _ten_class_scores()
    scores[:, 5:] -= 100.0  # classes 5..9: never predicted, and absent from this split
    labels = labels % 5
    matrix = ClassificationResults()(scores, labels)["confusion_matrix"]
    assert ClassificationResults(num_classes=10)(scores, labels)["confusion_matrix"] == matrix
    assert len(matrix) == 10
