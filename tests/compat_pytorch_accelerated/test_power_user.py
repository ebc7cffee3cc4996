"""A pytorch-accelerated code base with only its imports changed: subclasses and callbacks
written against the peer's Trainer keep working."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated import Trainer
from scramjet.compat.pytorch_accelerated.callbacks import TrainerCallback


def _data(n: int = 48) -> TensorDataset:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(3))
    return TensorDataset(x, (x[:, 0] > 0).long())


def _parts() -> tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    return model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)


class AccuracyTrainer(Trainer):
    """Overrides the epoch-end hooks without calling super(): the peer's defaults do nothing."""

    def train_epoch_end(self) -> None:
        self.run_history.update_metric("lr", self.optimizer.param_groups[0]["lr"])

    def eval_epoch_start(self) -> None:
        super().eval_epoch_start()
        self.correct = 0

    def calculate_eval_batch_loss(self, batch: Any) -> dict[str, Any]:
        out = super().calculate_eval_batch_loss(batch)
        self.correct += int((out["model_outputs"].argmax(-1) == batch[1]).sum())
        return out

    def eval_epoch_end(self) -> None:
        self.run_history.update_metric("accuracy", self.correct / len(self.eval_dataset))


def test_epoch_losses_are_recorded_when_epoch_end_hooks_are_overridden() -> None:
    model, loss, opt = _parts()
    seen: dict[str, set[str]] = {}

    class Watch(TrainerCallback):
        def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
            seen["train"] = trainer.run_history.get_metric_names()

        def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
            seen["eval"] = trainer.run_history.get_metric_names()

    trainer = AccuracyTrainer(model, loss, opt, callbacks=(Watch(),))
    trainer.train(_data(), num_epochs=2, eval_dataset=_data(16), per_device_batch_size=16)
    history = trainer.run_history
    assert len(history.get_metric_values("train_loss_epoch")) == 2
    assert len(history.get_metric_values("eval_loss_epoch")) == 2
    assert len(history.get_metric_values("accuracy")) == 2
    # as in the peer, the loss is there when the callbacks of the same event run
    assert {"train_loss_epoch", "lr"} <= seen["train"]
    assert {"eval_loss_epoch", "accuracy"} <= seen["eval"]


def test_epoch_loss_is_recorded_once_when_an_override_calls_super() -> None:
    class Polite(Trainer):
        def train_epoch_end(self) -> None:
            super().train_epoch_end()

        def eval_epoch_end(self) -> None:
            super().eval_epoch_end()

    model, loss, opt = _parts()
    trainer = Polite(model, loss, opt, callbacks=())
    trainer.train(_data(), num_epochs=3, eval_dataset=_data(16), per_device_batch_size=16)
    assert len(trainer.run_history.get_metric_values("train_loss_epoch")) == 3
    assert len(trainer.run_history.get_metric_values("eval_loss_epoch")) == 3


def test_train_step_end_callbacks_receive_the_peers_step_index() -> None:
    steps: list[int] = []

    class EveryOther(TrainerCallback):  # the peer's signature: step is a named argument
        def on_train_step_end(self, trainer: Any, step: int, **kwargs: Any) -> None:
            steps.append(step)

    model, loss, opt = _parts()
    trainer = Trainer(model, loss, opt, callbacks=(EveryOther(),))
    trainer.train(_data(), num_epochs=2, per_device_batch_size=16)
    assert steps == [0, 1, 2, 0, 1, 2]
