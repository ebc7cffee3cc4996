"""The Dashboard shows what every callback logged for an epoch, and a crash ends its row.

- A callback after the Dashboard that logs a metric in ``on_eval_epoch_end`` (or
  ``on_train_epoch_end``) used to be read before it had logged: each value was shown one
  epoch late, and the last epoch's never reached the screen, the curve or the CSV. The
  board now reads an epoch's metrics once every callback has had that event.
- A run that crashed in the middle of an epoch left the row counting down
  (``ETA 0:00:00``) where the default progress bar says ``ended early``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from scramjet import Trainer
from scramjet.callbacks import TrainerCallback
from scramjet.dashboard import Dashboard


def parts() -> tuple[nn.Module, Any, torch.optim.Optimizer, list[Any]]:
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = list(zip(x, (x[:, 0] > 0).long()))
    model = nn.Linear(4, 2)
    return model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), data


class LogsLate(TrainerCallback):
    """Logs the epoch number (1-based) as an eval and a train metric, after the board."""

    def on_train_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("train_mark", float(trainer.run_history.current_epoch))

    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("eval_acc", 0.1 * trainer.run_history.current_epoch)


@pytest.mark.parametrize("with_eval", [True, False])
def test_metrics_logged_by_a_later_callback_are_shown_for_their_own_epoch(
    tmp_path: Path, with_eval: bool
) -> None:
    model, loss, optimizer, data = parts()
    out = io.StringIO()
    board = Dashboard(log_path=tmp_path / "board", file=out)
    trainer = Trainer(model, loss, optimizer, callbacks=[board, LogsLate()])
    trainer.train(data, num_epochs=3, per_device_batch_size=16,
                  eval_dataset=data if with_eval else None)  # fmt: skip
    board.log()
    lines = out.getvalue().splitlines()
    train = [ln for ln in lines if ln.startswith("train epoch")]
    assert [ln.split("mark ")[1].split()[0] for ln in train] == ["1", "2", "3"], train
    marks = (tmp_path / "board" / "mark.csv").read_text().splitlines()[1:]
    assert [float(row.split(",")[-1]) for row in marks] == [1.0, 2.0, 3.0]
    if with_eval:
        evals = [ln for ln in lines if ln.startswith("eval epoch")]
        assert [ln.split("acc ")[1].split()[0] for ln in evals] == ["0.1", "0.2", "0.3"], evals
        acc = (tmp_path / "board" / "acc.csv").read_text().splitlines()[1:]
        assert [round(float(row.split(",")[-1]), 6) for row in acc] == [0.1, 0.2, 0.3]


class Boom(TrainerCallback):
    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.batches_seen_in_epoch == 2:
            raise RuntimeError("boom")


def test_a_crash_in_the_middle_of_an_epoch_ends_the_row_there(tmp_path: Path) -> None:
    model, loss, optimizer, data = parts()
    out = io.StringIO()
    board = Dashboard(log_path=tmp_path / "board", file=out, print_every=100)
    trainer = Trainer(model, loss, optimizer, callbacks=[board, Boom()])
    with pytest.raises(RuntimeError, match="boom"):
        trainer.train(data, num_epochs=2, per_device_batch_size=16)
    last = [ln for ln in out.getvalue().splitlines() if ln.startswith("train epoch")][-1]
    assert "2/4" in last and "ended early" in last and "ETA" not in last, last
