"""The compat Trainer's added behaviour: num_items_in_batch, run_config, limits, histories."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from tests.common.pa_history import DictHistory
from torch.utils.data import TensorDataset

from scramjet.compat.pytorch_accelerated import Trainer
from scramjet.compat.pytorch_accelerated.callbacks import (
    CallbackHandler,
    LimitBatchesCallback,
    LimitEvalStepsCallback,
    StepBasedEvaluationCallback,
    TrainerCallback,
)
from scramjet.compat.pytorch_accelerated.run_config import TrainerRunConfig
from scramjet.compat.pytorch_accelerated.utils import LimitBatches


def _data(n: int = 32) -> TensorDataset:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(1))
    return TensorDataset(x, (x[:, 0] > 0).long())


def _parts() -> tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Linear(4, 2)
    return model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)


class TokenLossTrainer(Trainer):
    """Reports num_items_in_batch, pretends to run on 4 processes, records backward losses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.backward_losses: list[float] = []

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        out = super().calculate_train_batch_loss(batch)
        return {**out, "num_items_in_batch": out["batch_size"]}

    def create_scheduler(self) -> Any:
        self.run_config = dataclasses.replace(self.run_config, num_processes=4)
        return super().create_scheduler()

    def backward_step(self, loss: torch.Tensor) -> None:
        self.backward_losses.append(float(loss.detach()))
        super().backward_step(loss)


def test_num_items_in_batch_undoes_the_mean_over_processes() -> None:
    trainer = TokenLossTrainer(*_parts(), callbacks=())
    trainer.train(_data(16), num_epochs=1, per_device_batch_size=4, gradient_accumulation_steps=2)
    means = trainer.train_losses.losses
    assert trainer.backward_losses == [
        float(m) * 4 / 2 for m in means
    ]  # x processes, / micro-batches in the window


def test_run_config_is_a_trainer_run_config() -> None:
    trainer = Trainer(*_parts(), callbacks=())
    trainer.train(
        _data(), num_epochs=1, per_device_batch_size=4, gradient_accumulation_steps=2,
        train_dataloader_kwargs={"num_workers": 0},
    )  # fmt: skip
    rc = trainer.run_config
    assert isinstance(rc, TrainerRunConfig)
    assert rc.train_total_batch_size == 8 and rc.num_update_steps_per_epoch == 4
    assert rc.train_dl_kwargs["batch_size"] == 4 and rc.train_dl_kwargs["shuffle"] is True
    assert rc.is_distributed is False and rc.mixed_precision == "no"


def test_limit_batches_block_adds_the_callback_first() -> None:
    with LimitBatches(3):
        trainer = Trainer(*_parts())
    assert isinstance(trainer.callbacks[0], LimitBatchesCallback)
    trainer.train(_data(), num_epochs=1, per_device_batch_size=4)
    assert trainer.state.global_step == 3
    assert not isinstance(Trainer(*_parts()).callbacks[0], LimitBatchesCallback)


class CountEvalSteps(TrainerCallback):
    def __init__(self) -> None:
        self.runs: list[int] = []

    def on_eval_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        self.runs.append(0)

    def on_eval_step_end(self, trainer: Any, **kwargs: Any) -> None:
        self.runs[-1] += 1


def test_limit_intermediate_only_leaves_end_of_epoch_evaluation_whole() -> None:
    counter = CountEvalSteps()
    callbacks = (
        StepBasedEvaluationCallback(eval_every_n_steps=4),
        LimitEvalStepsCallback(2, limit_intermediate_only=True),
        counter,
    )
    trainer = Trainer(*_parts(), callbacks=callbacks)
    trainer.train(_data(), num_epochs=1, per_device_batch_size=4, eval_dataset=_data(24))
    # After update 4 (limited); update 8 ends the epoch, so the epoch's end evaluates (whole).
    assert counter.runs == [2, 6]


def test_a_run_history_of_ones_own_is_recorded_and_advanced() -> None:
    history = DictHistory()
    trainer = Trainer(*_parts(), callbacks=(), run_history=history)
    trainer.train(_data(), num_epochs=3, per_device_batch_size=8)
    assert len(history.get_metric_values("train_loss_epoch")) == 3
    assert history.current_epoch == 4


def test_callback_handler_names() -> None:
    handler = CallbackHandler()
    handler.add_callbacks([CountEvalSteps(), CountEvalSteps()])
    assert len(handler.callback_list) == 2
    handler.clear_callbacks()
    assert handler.callback_list == [] and not handler.has("on_eval_step_end")


def test_get_model_strips_torch_compile_only_when_asked() -> None:
    model, loss, opt = _parts()
    compiled = torch.compile(model)
    trainer = Trainer(compiled, loss, opt, callbacks=())
    assert trainer.get_model() is compiled
    assert trainer.get_model(keep_torch_compile=False) is model


class RecordIntermediate(TrainerCallback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []

    def on_eval_epoch_start(self, trainer: Any, **kwargs: Any) -> None:
        self.seen.append(("start", kwargs["is_intermediate"]))

    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        self.seen.append(("end", kwargs["is_intermediate"]))


def test_eval_epoch_events_say_whether_the_evaluation_is_intermediate() -> None:
    # As pytorch-accelerated passes is_intermediate to on_eval_epoch_start/end.
    record = RecordIntermediate()
    callbacks = (StepBasedEvaluationCallback(eval_every_n_steps=3), record)
    trainer = Trainer(*_parts(), callbacks=callbacks)
    trainer.train(_data(), num_epochs=1, per_device_batch_size=4, eval_dataset=_data(8))
    # Update 3 and 6 evaluate inside the epoch; update 8 ends it and its own evaluation runs.
    inside, own = [("start", True), ("end", True)], [("start", False), ("end", False)]
    assert record.seen == inside * 2 + own
    record.seen.clear()
    trainer.evaluate(_data(8), per_device_batch_size=4)
    assert record.seen == own
