"""The Dashboard as a Trainer callback, its plain-text fallback, log() files, rank 0 only."""

from __future__ import annotations

import csv
import io
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet.callbacks import CallbackHandler, Event
from scramjet.dashboard import Dashboard
from scramjet.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from tmux_helpers import run_in_tmux, tmux_available

SCRIPT = Path(__file__).parent / "scripts" / "train_with_dashboard.py"


def _train(board: Dashboard, epochs: int = 2, n: int = 96, bs: int = 16) -> Trainer:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    x, y = torch.randn(n, 6), torch.randint(0, 3, (n,))
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[board],
        seed=0,
    )
    trainer.train(
        TensorDataset(x, y),
        num_epochs=epochs,
        per_device_batch_size=bs,
        eval_dataset=TensorDataset(x[:32], y[:32]),
    )
    return trainer


def test_registers_as_a_valid_callback() -> None:
    handler = CallbackHandler([Dashboard(file=io.StringIO())])
    assert handler.has(Event.TRAIN_STEP_END) and not handler.has(Event.TRAIN_STEP_START)


def test_trainer_run_records_every_step_and_epoch_metrics(tmp_path: Path) -> None:
    board = Dashboard(log_path=str(tmp_path), file=io.StringIO(), show_memory=False)
    trainer = _train(board, epochs=2)
    snap = board.snapshot()
    stages = {s.name: s for s in snap.stages}
    assert stages["train"].done == 6 and stages["train"].total == 6 and stages["train"].finished
    assert stages["eval"].done == 2 and stages["eval"].finished
    assert stages["train"].epoch == 1 and stages["train"].epochs == 2
    train_pts = snap.curves["loss"]["train"]
    assert len(train_pts) == 12  # one point per step, 2 epochs x 6 batches
    assert train_pts[-1][0] == pytest.approx(2.0)  # x = epoch progress
    eval_pts = snap.curves["loss"]["eval"]
    history = trainer.run_history.get_metric_values("eval_loss_epoch")
    assert [v for _, v in eval_pts] == pytest.approx(history)
    assert (
        snap.metrics["train"]["loss_epoch"]
        == f"{trainer.run_history.get_latest_metric('train_loss_epoch'):.4g}"
    )


def test_per_step_losses_match_the_model(tmp_path: Path) -> None:
    losses: list[float] = []

    class Spy(Dashboard):
        def on_train_step_end(self, trainer, **kwargs):  # type: ignore[no-untyped-def]
            losses.append(float(kwargs["batch_output"]["loss"].detach()))
            super().on_train_step_end(trainer, **kwargs)

    board = Spy(file=io.StringIO(), show_memory=False)
    _train(board, epochs=1)
    assert [v for _, v in board.snapshot().curves["loss"]["train"]] == pytest.approx(losses)


def test_not_a_terminal_prints_plain_lines(tmp_path: Path) -> None:
    out = io.StringIO()
    _train(Dashboard(file=out, print_every=0.01), epochs=2)
    text = out.getvalue()
    assert "\x1b" not in text and "█" not in text
    lines = text.splitlines()
    assert any(
        re.match(r"train epoch 2/2 6/6 \| [\d,]+ samples/s \| done \| loss ", line)
        for line in lines
    )
    assert any(line.startswith("eval epoch 2/2 2/2") for line in lines)
    assert any("CPU RSS" in line for line in lines)


def test_forced_terminal_draws_with_rich(tmp_path: Path) -> None:
    out = io.StringIO()
    _train(Dashboard(file=out, force_terminal=True, refresh_per_second=20), epochs=1)
    text = out.getvalue()
    assert "\x1b[" in text and "scramjet dashboard" in text and "█" in text


def test_log_writes_csv_and_png_per_metric(tmp_path: Path) -> None:
    board = Dashboard(log_path=str(tmp_path / "aerolog"), file=io.StringIO(), window=2)
    for epoch in range(2):
        for mile in range(4):
            board.gauge(
                {"loss": 1.0 / (1 + mile + 4 * epoch), "val/acc": 0.5}, mile, epoch, 4, "train"
            )
        board.gauge({"loss": 0.3 - 0.1 * epoch}, 0, epoch, 1, "test")
    board.log(record="record.txt")
    board.log(gauge=False, tachograph=False, record="record.txt")
    board.close()
    folder = tmp_path / "aerolog"
    assert sorted(p.name for p in folder.iterdir()) == [
        "loss.csv",
        "loss.png",
        "record.txt",
        "val_acc.csv",
        "val_acc.png",
    ]
    rows = list(csv.DictReader((folder / "loss.csv").open()))
    assert [r["stage"] for r in rows] == ["train"] * 8 + ["test"] * 2
    assert float(rows[5]["value"]) == pytest.approx(1.0 / 6) and rows[5]["epoch"] == "1"
    assert rows[5]["mile"] == "1" and rows[5]["step"] == "6"
    assert (folder / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = (folder / "record.txt").read_text().splitlines()
    assert len(record) == 4 and "train epoch 2 4/4" in record[0] and "test epoch 2" in record[1]
    assert not list(folder.glob(".tmp-*"))


def test_log_only_on_rank_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    out = io.StringIO()
    board = Dashboard(log_path=str(tmp_path / "rank1"), file=out)
    board.gauge({"loss": 1.0}, 0, 0, 1, "train")
    board.log()
    board.close()
    assert out.getvalue() == "" and not (tmp_path / "rank1").exists()
    assert board.snapshot().stages == []


def test_gauge_interval_and_tensors(tmp_path: Path) -> None:
    board = Dashboard(file=io.StringIO(), show_memory=False)
    for mile in range(10):
        board.gauge({"loss": torch.tensor(float(mile))}, mile, 0, 10, "train", interval=4)
    board.close()
    pts = board.snapshot().curves["loss"]["train"]
    assert [v for _, v in pts] == [0.0, 4.0, 8.0, 9.0]  # every 4th mile and the last
    assert board.snapshot().metrics["train"]["loss"] == "9"


@pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")
def test_real_terminal_in_tmux() -> None:
    text = run_in_tmux([sys.executable, str(SCRIPT)], width=100, height=40, timeout=90)
    lines = text.splitlines()
    assert any(
        re.search(r"^train\s+epoch 3/3\s+█+\s+32/32\s+[\d,]+ samples/s\s+done", line)
        for line in lines
    ), text
    assert any(re.search(r"^eval\s+epoch 3/3\s+█+\s+8/8", line) for line in lines), text
    assert any("loss  (moving average 2, last 40 points" in line for line in lines), text
    curve_rows = [line for line in lines if "┤" in line]
    assert len(curve_rows) == 6 and sum(line.count("•") for line in curve_rows) >= 30, text
    assert "└" + "─" * 40 in text
    # The screen was redrawn in place: one dashboard, not one per refresh.
    assert text.count("scramjet dashboard") == 1


def test_warns_next_to_the_progress_bar() -> None:
    from scramjet.callbacks import ProgressBarCallback

    board = Dashboard(file=io.StringIO())
    model = torch.nn.Linear(2, 2)
    trainer = Trainer(
        model,
        torch.nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[ProgressBarCallback(file=io.StringIO()), board],
    )
    data = TensorDataset(torch.randn(8, 2), torch.randn(8, 2))
    with pytest.warns(UserWarning, match="ProgressBarCallback"):
        trainer.train(data, num_epochs=1, per_device_batch_size=4)


def test_nothing_is_queued_outside_a_rank_0_run() -> None:
    board = Dashboard(file=io.StringIO())
    output = {"loss": torch.tensor(1.0), "batch_size": 4}
    board.on_train_step_end(None, batch=None, batch_output=output)  # type: ignore[arg-type]
    assert board.snapshot().curves == {}


def test_log_png_draws_no_average_where_the_loss_is_nan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.axes import Axes

    drawn: list[list[float]] = []
    real_plot = Axes.plot

    def spy(self: Axes, xs: Any, ys: Any, *args: Any, **kwargs: Any) -> Any:
        drawn.append([float(y) for y in ys])
        return real_plot(self, xs, ys, *args, **kwargs)

    monkeypatch.setattr(Axes, "plot", spy)
    board = Dashboard(log_path=str(tmp_path), window=3, file=io.StringIO(), show_memory=False)
    for mile in range(6):
        board.gauge({"loss": 1.0 if mile < 3 else math.nan}, mile, 0, 6, "train")
    board.log(tachograph=False)
    board.close()
    raw, average = drawn
    assert math.isnan(raw[-1])
    assert [math.isnan(y) for y in average] == [False] * 3 + [True] * 3, average


def test_a_second_train_call_continues_the_curves() -> None:
    # Two phases (train the head, then fine-tune): the second run's points follow the
    # first's on the x axis instead of being drawn (and averaged) on top of them.
    board = Dashboard(file=io.StringIO(), show_memory=False)
    trainer = _train(board, epochs=2)
    trainer.train(
        TensorDataset(torch.randn(96, 6), torch.randint(0, 3, (96,))),
        num_epochs=1,
        per_device_batch_size=16,
        eval_dataset=TensorDataset(torch.randn(32, 6), torch.randint(0, 3, (32,))),
    )
    curves = board.snapshot().curves["loss"]
    train_x = [x for x, _ in curves["train"]]
    assert train_x == sorted(train_x) and len(set(train_x)) == 18, train_x
    assert train_x[-1] == pytest.approx(3.0)
    assert [x for x, _ in curves["eval"]] == [1.0, 2.0, 3.0]


def test_a_standalone_evaluate_is_shown_when_it_runs() -> None:
    out = io.StringIO()
    board = Dashboard(file=out, show_memory=False)
    trainer = _train(board, epochs=1)
    before = out.getvalue()
    trainer.evaluate(
        TensorDataset(torch.randn(48, 6), torch.randint(0, 3, (48,))), per_device_batch_size=16
    )
    lines = out.getvalue()[len(before) :].splitlines()
    assert len(lines) == 1 and lines[0].startswith("eval epoch 1 3/3 "), lines
    assert [x for x, _ in board.snapshot().curves["loss"]["eval"]] == [1.0, 1.0]  # same model
    assert not board._started  # the display is closed again
