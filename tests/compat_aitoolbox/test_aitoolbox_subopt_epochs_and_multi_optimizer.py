"""Keeping the best checkpoints by a metric evaluated every few epochs or named as an error,
and a MultiOptimizer subclass that steps its optimizers its own way.

Before: the n-th checkpoint was ranked by the n-th value (with ``eval_frequency=2`` the
checkpoint of epoch 1 got epoch 2's value and later ones were never ranked nor removed);
``val_mse`` and AIToolbox's ``val_Mean_squared_error`` were maximised; the loop stepped the
MultiOptimizer's inner optimizers itself, so an override of ``step``/``zero_grad`` never ran.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from scramjet.compat.aitoolbox.experiment.result_package.basic_packages import (
    RegressionResultPackage,
)
from scramjet.compat.aitoolbox.torchtrain.callbacks.basic import EarlyStopping
from scramjet.compat.aitoolbox.torchtrain.callbacks.performance_eval import (
    ModelPerformanceEvaluation,
)
from scramjet.compat.aitoolbox.torchtrain.model import TTModel
from scramjet.compat.aitoolbox.torchtrain.multi_loss_optim import MultiLoss, MultiOptimizer
from scramjet.compat.aitoolbox.torchtrain.train_loop import TrainLoop, TrainLoopCheckpoint


class Regressor(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)

    def get_loss(self, batch, criterion, device):
        x, y = batch
        return criterion(self(x), y)

    def get_predictions(self, batch, device):
        x, y = batch
        return self(x).squeeze(1), y.squeeze(1), None


def _loaders() -> tuple[DataLoader, DataLoader]:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 1, generator=gen)
    x, xv = torch.randn(40, 3, generator=gen), torch.randn(20, 3, generator=gen)
    return (DataLoader(TensorDataset(x, x @ w), batch_size=8),
            DataLoader(TensorDataset(xv, xv @ w), batch_size=8))  # fmt: skip


def _kept(root: Path) -> list[int]:
    files = root.glob("p/*/checkpoint_model/*.pth")
    return sorted(int(re.search(r"_E(\d+)\.pth$", f.name)[1]) for f in files)  # type: ignore[index]


@pytest.mark.parametrize(("metric", "frequency"), [("val_mse", None),
                                                   ("val_Mean_squared_error", 2)])  # fmt: skip
def test_checkpoints_are_ranked_by_their_own_epochs_value_lowest_error_first(
    tmp_path: Path, metric: str, frequency: int | None
) -> None:
    torch.manual_seed(0)
    model = Regressor()
    loop = TrainLoopCheckpoint(
        model,
        *_loaders(),
        None,
        torch.optim.SGD(model.parameters(), lr=0.05),
        nn.MSELoss(),
        "p",
        "e",
        str(tmp_path),
        {},
        cloud_save_mode=None,
        rm_subopt_local_models=metric,
        num_best_checkpoints_kept=2,
    )
    package = RegressionResultPackage()
    loop.fit(
        num_epochs=6, callbacks=[ModelPerformanceEvaluation(package, {}, eval_frequency=frequency)]
    )
    values = loop.train_history[metric]
    epochs = loop.train_history.epochs_of(metric)
    assert epochs == ([0, 2, 4] if frequency else list(range(6))), epochs
    best = sorted(sorted(epochs, key=lambda e: values[epochs.index(e)])[:2])
    # The two lowest errors; with a value every 2nd epoch the unevaluated checkpoints go,
    # except the last epoch's, which the run ended before any value could rank.
    assert _kept(tmp_path) == ([*best, 5] if frequency else best), (values, _kept(tmp_path))
    assert max(values) == values[0]  # the error falls: the newest are the best, not the first


def test_early_stopping_minimises_an_mse_metric() -> None:
    assert EarlyStopping(monitor="val_mse", patience=0).mode == "min"
    assert EarlyStopping(monitor="val_Accuracy", patience=0).mode == "max"


class TwoHeads(TTModel):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(3, 1), nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.a(x), self.b(x)

    def get_loss(self, batch, criterion, device):
        x, y = batch
        pa, pb = self(x)
        return MultiLoss({"la": criterion(pa, y), "lb": criterion(pb, y)})

    def get_predictions(self, batch, device):
        x, y = batch
        return self(x)[0], y, None


class FirstOnly(MultiOptimizer):
    """Steps only optimizer 0 (an alternating schedule would pick by iteration)."""

    def __init__(self, optimizers) -> None:
        super().__init__(optimizers)
        self.calls: list[tuple[str, int, int]] = []

    def step(self, optimizer_idx, iteration, amp_grad_scaler):
        self.calls.append(("step", optimizer_idx, iteration))
        if optimizer_idx == 0:
            super().step(optimizer_idx, iteration, amp_grad_scaler)

    def zero_grad(self, optimizer_idx, iteration):
        self.calls.append(("zero", optimizer_idx, iteration))
        super().zero_grad(optimizer_idx, iteration)


def test_a_multi_optimizer_subclass_steps_and_zeroes_by_index_and_iteration() -> None:
    torch.manual_seed(0)
    model = TwoHeads()
    b_before, a_before = model.b.weight.detach().clone(), model.a.weight.detach().clone()
    optimizer = FirstOnly([torch.optim.SGD(model.a.parameters(), lr=0.1),
                           torch.optim.SGD(model.b.parameters(), lr=0.1)])  # fmt: skip
    train, _ = _loaders()
    loop = TrainLoop(model, train, None, None, optimizer, nn.MSELoss(), end_auto_eval=False)
    loop.fit(num_epochs=1)
    per_update = [("step", 0), ("step", 1), ("zero", 0), ("zero", 1)]
    assert optimizer.calls == [(kind, idx, it) for it in range(5) for kind, idx in per_update]
    assert torch.equal(model.b.weight, b_before)  # the subclass never stepped optimizer 1
    assert not torch.equal(model.a.weight, a_before)
