"""A pytorch-accelerated project ported by changing its imports: second runs, resumes and
the peer's extension points behave as they did, and as an uninterrupted run."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

import scramjet
from scramjet.compat.pytorch_accelerated import Trainer
from scramjet.compat.pytorch_accelerated.callbacks import SaveTrainingStateCallback
from scramjet.compat.pytorch_accelerated.tracking import RunHistory


def _data(n: int = 96) -> TensorDataset:
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(0))
    return TensorDataset(x, (x[:, 0] + x[:, 1] > 0).long())


def _parts() -> tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, torch.nn.CrossEntropyLoss(), opt


def _losses(trainer: Any) -> list[float]:
    return [float(v) for v in trainer.run_history.get_metric_values("train_loss_epoch")]


def test_a_checkpoint_saved_after_train_resumes_without_the_last_epochs_losses(
    tmp_path: Path,
) -> None:
    # docs/compat.md's example: save after train() returns, then continue for one epoch.
    model, loss, opt = _parts()
    first = Trainer(model, loss, opt, callbacks=())
    first.train(_data(), num_epochs=2, per_device_batch_size=16)
    first.save_checkpoint(tmp_path / "model.pt")
    resumed = Trainer(*_parts(), callbacks=())
    resumed.train(_data(), num_epochs=3, per_device_batch_size=16,
                  resume_from=tmp_path / "model.pt")  # fmt: skip
    straight = Trainer(*_parts(), callbacks=())
    straight.train(_data(), num_epochs=3, per_device_batch_size=16)
    assert _losses(resumed) == pytest.approx(_losses(straight), rel=1e-6)


def test_a_state_saved_inside_a_step_resumes_with_each_batch_counted_once(
    tmp_path: Path,
) -> None:
    model, loss, opt = _parts()
    saver = SaveTrainingStateCallback(tmp_path, save_every_n_steps=2, save_at_end=False)
    full = Trainer(model, loss, opt, callbacks=(saver,))
    full.train(_data(), num_epochs=2, per_device_batch_size=16)
    resumed = Trainer(*_parts(), callbacks=())
    resumed.train(_data(), num_epochs=2, per_device_batch_size=16,
                  resume_from=tmp_path / "checkpoint_step_2")  # fmt: skip
    for a, b in zip(resumed.model.parameters(), full.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert _losses(resumed) == pytest.approx(_losses(full), rel=1e-6)


def test_the_core_trainers_checkpoint_after_train_resumes_the_next_epochs_loss_alone(
    tmp_path: Path,
) -> None:
    first = scramjet.Trainer(*_parts(), callbacks=())
    first.train(_data(), num_epochs=2, per_device_batch_size=16)
    first.save_checkpoint(tmp_path / "model.pt")
    resumed = scramjet.Trainer(*_parts(), callbacks=())
    resumed.train(_data(), num_epochs=3, per_device_batch_size=16,
                  resume_from=tmp_path / "model.pt")  # fmt: skip
    straight = scramjet.Trainer(*_parts(), callbacks=())
    straight.train(_data(), num_epochs=3, per_device_batch_size=16)
    assert _losses(resumed) == pytest.approx(_losses(straight), rel=1e-6)


class ListHistory(RunHistory):
    """A run history of one's own, written against the peer's abstract interface."""

    def __init__(self) -> None:
        self.reset()

    def get_metric_names(self) -> set[str]:
        return set(self._metrics)

    def get_metric_values(self, metric_name: str) -> list[Any]:
        return list(self._metrics[metric_name])

    def get_latest_metric(self, metric_name: str) -> Any:
        if not self._metrics.get(metric_name):
            raise ValueError(metric_name)
        return self._metrics[metric_name][-1]

    def update_metric(self, metric_name: str, metric_value: Any) -> None:
        self._metrics[metric_name].append(metric_value)

    @property
    def current_epoch(self) -> int:
        return self._epoch

    def _increment_epoch(self) -> None:
        self._epoch += 1

    def reset(self) -> None:
        self._metrics: defaultdict[str, list[Any]] = defaultdict(list)
        self._epoch = 1


def test_a_resumed_run_history_of_ones_own_counts_epochs_as_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    seen: dict[str, list[int]] = {"resumed": [], "straight": []}

    class EpochTrainer(Trainer):
        def train_epoch_start(self) -> None:
            super().train_epoch_start()
            seen[self.name].append(self.run_history.current_epoch)

    first = EpochTrainer(*_parts(), callbacks=(), run_history=ListHistory())
    first.name = "straight"
    first.train(_data(), num_epochs=2, per_device_batch_size=16)
    first.save_checkpoint(tmp_path / "model.pt")
    resumed = EpochTrainer(*_parts(), callbacks=(), run_history=ListHistory())
    resumed.name = "resumed"
    resumed.train(_data(), num_epochs=3, per_device_batch_size=16,
                  resume_from=tmp_path / "model.pt")  # fmt: skip
    assert seen["resumed"] == [3]
    assert resumed.run_history.current_epoch == 4
    assert len(resumed.run_history.get_metric_values("train_loss_epoch")) == 3


def test_a_log_metrics_override_receives_the_peers_metrics_at_the_peers_events() -> None:
    from scramjet.compat.pytorch_accelerated.callbacks import LogMetricsCallback

    logged: list[tuple[int, dict[str, Any]]] = []

    class PlatformLogger(LogMetricsCallback):  # the peer's documented way to add a logger
        def log_metrics(self, trainer: Any, metrics: dict[str, Any]) -> None:
            logged.append((trainer.run_history.current_epoch, dict(metrics)))

    class WithAccuracy(Trainer):
        def eval_epoch_end(self) -> None:
            self.run_history.update_metric("accuracy", 0.5)

    trainer = WithAccuracy(*_parts(), callbacks=(PlatformLogger,))
    trainer.train(_data(), num_epochs=2, eval_dataset=_data(32), per_device_batch_size=16)
    assert [(epoch, sorted(metrics)) for epoch, metrics in logged] == [
        (1, ["train_loss_epoch"]), (1, ["accuracy", "eval_loss_epoch"]),
        (2, ["train_loss_epoch"]), (2, ["accuracy", "eval_loss_epoch"]),
    ]  # fmt: skip
    assert logged[-1][1]["eval_loss_epoch"] == trainer.run_history.get_latest_metric(
        "eval_loss_epoch"
    )
    trainer.evaluate(_data(32), per_device_batch_size=16)
    assert sorted(logged[-1][1]) == ["accuracy", "eval_loss_epoch", "evaluation_loss"]


def test_a_standalone_evaluation_is_recorded_under_the_peers_evaluation_loss() -> None:
    model, loss, opt = _parts()
    trainer = Trainer(model, loss, opt, callbacks=())
    trainer.train(_data(), num_epochs=1, eval_dataset=_data(32), per_device_batch_size=16)
    assert "evaluation_loss" not in trainer.run_history.get_metric_names()
    test = _data(40)
    trainer.evaluate(test, per_device_batch_size=16)
    with torch.no_grad():
        expected = float(loss(model(test.tensors[0]), test.tensors[1]))
    assert trainer.run_history.get_latest_metric("evaluation_loss") == pytest.approx(expected)
    assert trainer.run_history.get_latest_metric("eval_loss_epoch") == pytest.approx(expected)


def test_early_stopping_and_best_model_answer_the_peers_attribute_names(tmp_path: Path) -> None:
    from scramjet.compat.pytorch_accelerated.callbacks import (
        EarlyStoppingCallback,
        SaveBestModelCallback,
    )

    stop = EarlyStoppingCallback(early_stopping_patience=2, early_stopping_threshold=10.0)
    best = SaveBestModelCallback(save_path=tmp_path / "best.pt", load_saved_checkpoint=False)
    trainer = Trainer(*_parts(), callbacks=(best, stop))
    trainer.train(_data(), num_epochs=5, eval_dataset=_data(32), per_device_batch_size=16)
    first_eval = trainer.run_history.get_metric_values("eval_loss_epoch")[0]
    assert len(trainer.run_history.get_metric_values("eval_loss_epoch")) == 3
    assert stop.best_metric == first_eval  # no later change beats the threshold
    assert stop.early_stopping_patience_counter == 2
    assert (stop.early_stopping_patience, stop.early_stopping_threshold) == (2, 10.0)
    assert best.best_metric == min(trainer.run_history.get_metric_values("eval_loss_epoch"))
    assert best.best_metric_epoch == 3


def test_an_override_of_the_peers_clip_gradients_is_the_clipping_that_runs() -> None:
    class ClipByNorm(Trainer):  # the peer's way to clip by norm instead of by value
        def _clip_gradients(self) -> None:
            self._accelerator.clip_grad_norm_(
                self.model.parameters(), max_norm=self.run_config.gradient_clip_value
            )

    model, loss, opt = _parts()
    ClipByNorm(model, loss, opt, callbacks=()).train(
        _data(), num_epochs=2, per_device_batch_size=16, gradient_clip_value=0.05,
        train_dataloader_kwargs={"shuffle": False},
    )  # fmt: skip
    plain, plain_loss, plain_opt = _parts()
    for _ in range(2):
        for x, y in torch.utils.data.DataLoader(_data(), batch_size=16):
            plain_loss(plain(x), y).backward()
            torch.nn.utils.clip_grad_norm_(plain.parameters(), 0.05)
            plain_opt.step()
            plain_opt.zero_grad()
    for a, b in zip(model.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_best_model_is_reloaded_with_its_optimizer_state_as_the_peer_does(
    tmp_path: Path,
) -> None:
    from scramjet.compat.pytorch_accelerated.callbacks import SaveBestModelCallback

    # greater_is_better on a falling loss: the first epoch stays the best one
    best = SaveBestModelCallback(save_path=tmp_path / "best.pt", greater_is_better=True)
    model, loss, opt = _parts()
    trainer = Trainer(model, loss, opt, callbacks=(best,))
    trainer.train(_data(), num_epochs=3, eval_dataset=_data(32), per_device_batch_size=16)
    assert best.best_metric_epoch == 1
    saved = torch.load(tmp_path / "best.pt", map_location="cpu", weights_only=True)
    for name, value in saved["model_state_dict"].items():
        torch.testing.assert_close(model.state_dict()[name], value, rtol=0, atol=0)
    momentum = opt.state_dict()["state"][0]["momentum_buffer"]
    saved_momentum = saved["optimizer_state_dict"]["state"][0]["momentum_buffer"]
    torch.testing.assert_close(momentum, saved_momentum, rtol=0, atol=0)
