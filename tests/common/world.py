"""Tiny synthetic models and datasets, small enough that a full run takes milliseconds."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback


def blobs(
    n: int = 96, dim: int = 8, classes: int = 3, seed: int = 0, spread: float = 0.6
) -> TensorDataset:
    """Gaussian blobs around well-separated class centres: a linear model learns them."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dim, generator=g) * 2.0
    y = torch.arange(n) % classes
    x = centres[y] + spread * torch.randn(n, dim, generator=g)
    return TensorDataset(x, y)


def regression(n: int = 40, dim: int = 4, seed: int = 0) -> TensorDataset:
    """A noisy linear regression problem with float targets of shape (n, 1)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, 1, generator=g)
    return TensorDataset(x, x @ w + 0.1 * torch.randn(n, 1, generator=g))


class TinyMLP(nn.Module):
    """Two linear layers; deterministic initialisation from ``seed``."""

    def __init__(self, dim: int = 8, hidden: int = 16, out: int = 3, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.net = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class NoisyDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Adds fresh random noise to every sample on every access (worker RNG matters)."""

    def __init__(self, base: TensorDataset) -> None:
        self.base = base

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.base[i]
        return x + 0.1 * torch.randn_like(x), y


def make_trainer(
    model: nn.Module | None = None,
    *,
    lr: float = 0.1,
    loss: Any = None,
    callbacks: Iterable[Any] = (),
    trainer_cls: type[Trainer] = Trainer,
    **kwargs: Any,
) -> Trainer:
    """A Trainer over ``model`` (a TinyMLP by default) with plain SGD and no default callbacks."""
    model = model if model is not None else TinyMLP()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    return trainer_cls(
        model,
        loss if loss is not None else nn.CrossEntropyLoss(),
        opt,
        callbacks=callbacks,
        **kwargs,
    )


def accuracy(model: nn.Module, data: TensorDataset) -> float:
    """Fraction of correctly classified samples."""
    x, y = data.tensors
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def dataset_loss(model: nn.Module, data: TensorDataset, loss: Any = None) -> float:
    """Mean loss per sample over the whole dataset, in one batch."""
    x, y = data.tensors
    loss = loss if loss is not None else nn.CrossEntropyLoss()
    with torch.no_grad():
        return float(loss(model(x), y))


def clone(model: nn.Module) -> nn.Module:
    """An independent copy with the same weights."""
    return copy.deepcopy(model)


def assert_same_weights(a: nn.Module, b: nn.Module, atol: float = 1e-6) -> None:
    """Every parameter and buffer of ``a`` equals the one of ``b`` to ``atol``."""
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], atol=atol, rtol=0, msg=f"{k} differs")


class Recorder(TrainerCallback):
    """Records every event it receives, by name (seed 004's names where they differ)."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.log: list[str] = log if log is not None else []

    def on_init_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_init_end")

    def on_train_run_begin(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_train_run_begin")

    def on_train_epoch_begin(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_train_epoch_begin")

    def on_train_step_begin(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_train_step_begin")

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        assert "loss" in kwargs["batch_output"] and kwargs["batch"] is not None
        self.log.append("on_train_step_end")

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_optimizer_step_end")

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_train_epoch_end")

    def on_evaluation_run_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_evaluation_run_start")

    def on_eval_epoch_begin(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_eval_epoch_begin")

    def on_eval_step_begin(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_eval_step_begin")

    def on_eval_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        assert "loss" in kwargs["batch_output"] and kwargs["batch"] is not None
        self.log.append("on_eval_step_end")

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_eval_epoch_end")

    def on_evaluation_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_evaluation_run_end")

    def on_training_run_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_training_run_epoch_end")

    def on_train_run_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_train_run_end")

    def on_stop_training_error(self, trainer: Trainer, **kwargs: Any) -> None:
        self.log.append("on_stop_training_error")


class StepRecorder(TrainerCallback):
    """Keeps ``(loss, batch_size)`` of every training step and the weights after each update."""

    def __init__(self) -> None:
        self.losses: list[tuple[float, int]] = []
        self.weights: list[dict[str, torch.Tensor]] = []

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        out = kwargs["batch_output"]
        self.losses.append((float(out["loss"].detach()), int(out["batch_size"])))

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.weights.append(
            {k: v.detach().clone() for k, v in trainer.unwrapped_model.state_dict().items()}
        )
