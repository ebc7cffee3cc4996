"""``DEFAULT_CALLBACKS`` of the pytorch-accelerated layer holds the classes the layer exports
under the same names: the peer's way to send metrics elsewhere (drop ``LogMetricsCallback``
from the defaults, add a subclass of it) leaves one logger, not the core one beside it."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import TensorDataset

import scramjet.compat.pytorch_accelerated.callbacks as pa_callbacks
from scramjet.compat.pytorch_accelerated import DEFAULT_CALLBACKS, Trainer
from scramjet.compat.pytorch_accelerated.callbacks import LogMetricsCallback


def test_each_default_is_the_class_exported_under_its_name() -> None:
    for cls in DEFAULT_CALLBACKS:
        exported = getattr(pa_callbacks, cls.__name__)
        assert exported is cls, (cls, exported)


class Collect(LogMetricsCallback):
    """A logger for another platform, as pytorch-accelerated documents it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def log_metrics(self, trainer: Any, metrics: dict[str, Any]) -> None:
        self.sent.append(metrics)


def test_replacing_the_default_logger_leaves_only_the_replacement(capsys) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    collect = Collect()
    kept = [cb for cb in DEFAULT_CALLBACKS if cb is not LogMetricsCallback]
    assert len(kept) == len(DEFAULT_CALLBACKS) - 1  # the filter found the default logger
    trainer = Trainer(
        model,
        torch.nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[*kept, collect],
    )
    data = TensorDataset(torch.randn(16, 3), torch.randn(16, 1))
    trainer.train(data, num_epochs=2, eval_dataset=data, per_device_batch_size=8)
    loggers = [
        cb for cb in trainer.callback_handler.callbacks if isinstance(cb, LogMetricsCallback)
    ]
    assert loggers == [collect]
    assert [sorted(m) for m in collect.sent] == [["train_loss_epoch"], ["eval_loss_epoch"]] * 2
    assert "train_loss_epoch" not in capsys.readouterr().out  # no core metric line beside it
