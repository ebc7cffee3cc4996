"""A pytorch-accelerated code base with only its imports changed: subclasses and callbacks
written against the peer's Trainer keep working."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated import Trainer, TrainerPlaceholderValues
from scramjet.compat.pytorch_accelerated.callbacks import TrainerCallback
from scramjet.compat.pytorch_accelerated.trainer import replace_trainer_placeholder_values


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


def test_callbacks_reading_the_peers_accelerator_and_loaders_work() -> None:
    seen: dict[str, Any] = {}

    class PeerStyle(TrainerCallback):  # as the peer's own ProgressBar and EMA callbacks read
        def on_train_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
            seen["batches"] = len(trainer._train_dataloader)
            seen["eval_batches"] = len(trainer._eval_dataloader)
            seen["local_main"] = trainer._accelerator.is_local_main_process
            seen["main"] = trainer._accelerator.is_main_process
            seen["processes"] = trainer._accelerator.num_processes
            seen["model"] = trainer._accelerator.unwrap_model(trainer.model)
            trainer._accelerator.wait_for_everyone()

    model, loss, opt = _parts()
    trainer = Trainer(model, loss, opt, callbacks=(PeerStyle(),))
    trainer.train(_data(), num_epochs=1, eval_dataset=_data(16), per_device_batch_size=16)
    assert seen == {
        "batches": 3, "eval_batches": 1, "local_main": True, "main": True, "processes": 1,
        "model": model,
    }  # fmt: skip
    assert trainer._accelerator.device == trainer.device


def test_backward_step_override_through_the_accelerator_matches_the_default() -> None:
    class PeerBackward(Trainer):
        def backward_step(self, loss: torch.Tensor) -> None:
            self._accelerator.backward(loss)

        def clip_gradients(self) -> None:
            self._accelerator.clip_grad_value_(self.model.parameters(), 0.05)

    results = []
    for cls in (Trainer, PeerBackward):
        model, loss, opt = _parts()
        cls(model, loss, opt, callbacks=()).train(
            _data(), num_epochs=2, per_device_batch_size=8, gradient_accumulation_steps=2,
            gradient_clip_value=0.05, train_dataloader_kwargs={"shuffle": False},
        )  # fmt: skip
        results.append(model.weight.detach().clone())
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)


def test_an_accelerator_attribute_it_lacks_names_what_it_offers() -> None:
    model, loss, opt = _parts()
    trainer = Trainer(model, loss, opt, callbacks=())
    with pytest.raises(AttributeError, match=r"'prepare'.*unwrap_model.*trainer\.get_model"):
        trainer._accelerator.prepare(model)


def test_a_create_scheduler_override_builds_from_create_scheduler_fn() -> None:
    class MyScheduling(Trainer):  # the peer's documented way to customise the scheduler
        def create_scheduler(self) -> Any:
            made = replace_trainer_placeholder_values(self, self.create_scheduler_fn)
            return made(self.optimizer)

    model, loss, opt = _parts()
    trainer = MyScheduling(model, loss, opt, callbacks=())
    fn = partial(
        torch.optim.lr_scheduler.OneCycleLR, max_lr=0.1,
        epochs=TrainerPlaceholderValues.NUM_EPOCHS,
        steps_per_epoch=TrainerPlaceholderValues.NUM_UPDATE_STEPS_PER_EPOCH,
    )  # fmt: skip
    trainer.train(_data(), num_epochs=2, per_device_batch_size=16, create_scheduler_fn=fn)
    assert trainer.create_scheduler_fn is fn
    assert trainer.scheduler is not None and trainer.scheduler.last_epoch == 6


def test_the_peers_per_process_placeholder_resolves_to_the_updates_per_epoch() -> None:
    model, loss, opt = _parts()
    trainer = Trainer(model, loss, opt, callbacks=())
    per_process = TrainerPlaceholderValues.PER_PROCESS_NUM_UPDATE_STEPS_PER_EPOCH
    fn = partial(
        torch.optim.lr_scheduler.OneCycleLR, max_lr=0.1,
        epochs=TrainerPlaceholderValues.NUM_EPOCHS, steps_per_epoch=per_process,
    )  # fmt: skip
    trainer.train(_data(), num_epochs=2, per_device_batch_size=8, gradient_accumulation_steps=2,
                  create_scheduler_fn=fn)  # fmt: skip
    assert trainer.scheduler is not None and trainer.scheduler.total_steps == 2 * 3
    assert "PER_PROCESS_NUM_UPDATE_STEPS_PER_EPOCH" in repr(per_process * 2)
    assert {"NUM_EPOCHS", "PER_PROCESS_NUM_UPDATE_STEPS_PER_EPOCH", "TRAIN_DATALOADER_LEN"} <= (
        TrainerPlaceholderValues.placeholder_set()
    )
