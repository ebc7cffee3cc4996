"""``ProgressBarCallback`` draws through the same display as the Dashboard: with
``FORCE_COLOR`` on a log that is not a terminal it prints plain lines, not live frames."""

from __future__ import annotations

import io

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet.callbacks import ProgressBarCallback
from scramjet.trainer import Trainer


def test_progress_bar_with_force_color_on_a_log_prints_plain_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    out = io.StringIO()
    model = torch.nn.Linear(2, 1)
    trainer = Trainer(
        model,
        torch.nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[ProgressBarCallback(file=out)],
    )
    data = TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
    trainer.train(data, num_epochs=1, per_device_batch_size=4)
    assert "\x1b[" not in out.getvalue(), out.getvalue()[:300]
