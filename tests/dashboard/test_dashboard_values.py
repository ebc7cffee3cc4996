"""Evaluation points are drawn as they are; no plain line is printed twice (also at exit)."""

from __future__ import annotations

import io
import math
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import TensorDataset

from scramjet.callbacks import TrainerCallback
from scramjet.dashboard import Dashboard, moving_average, render_curve
from scramjet.dashboard._plot import smooth_series
from scramjet.dashboard._view import plain_lines
from scramjet.trainer import Trainer


def _rows(lines: list[str], divisor: int) -> dict[str, str]:
    """``{y label: grid row}`` of a rendered curve."""
    return {ln.split("┤")[0].strip(): ln.split("┤", 1)[1] for ln in lines[:divisor]}


def test_eval_points_keep_their_values_while_train_steps_are_smoothed() -> None:
    # 10 train steps per epoch for 3 epochs, falling slowly; eval once per epoch, falling fast.
    train = [(i / 10, 1.0 - i * 0.005) for i in range(1, 31)]
    evals = [(1.0, 0.5), (2.0, 0.3), (3.0, 0.08)]
    lines = render_curve({"train": train, "eval": evals}, span=30, divisor=10, window=5)
    rows = _rows(lines, 10)
    # The lowest row is the last eval value itself (a 3-point average would be 0.2933).
    assert "0.08" in rows and rows["0.08"].rstrip().endswith("o"), lines
    assert rows["0.08"].count("o") == 1 and "•" not in rows["0.08"]
    # The first eval point sits on the row nearest 0.5, not on an average with later ones.
    labels = {float(k): v for k, v in rows.items()}
    nearest = min(labels, key=lambda y: abs(y - 0.5))
    assert labels[nearest].index("o") == 9, lines  # x = 1.0 is the 10th column
    # train keeps its moving average: its last point is the mean of the last 5 steps.
    smoothed = smooth_series(train, 5)
    assert smoothed[-1][1] == pytest.approx(sum(y for _, y in train[-5:]) / 5)
    assert smooth_series(evals, 5) == evals
    assert [y for _, y in smoothed] == moving_average([y for _, y in train], 5)


class _HoldEpochEnd(TrainerCallback):
    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        time.sleep(0.1)  # several periodic prints pass after the last batch


def _train(board: Dashboard, epochs: int = 3) -> Trainer:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    x, y = torch.randn(96, 6), torch.randint(0, 3, (96,))
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.5),
        callbacks=[_HoldEpochEnd(), board],
        seed=0,
    )
    trainer.train(
        TensorDataset(x, y),
        num_epochs=epochs,
        per_device_batch_size=16,
        eval_dataset=TensorDataset(x[:32], y[:32]),
    )
    return trainer


def test_trainer_eval_curve_shows_each_epoch_value(tmp_path: Path) -> None:
    board = Dashboard(log_path=str(tmp_path), window=5, file=io.StringIO(), show_memory=False)
    trainer = _train(board)
    snap = board.snapshot()
    history = trainer.run_history.get_metric_values("eval_loss_epoch")
    evals = snap.curves["loss"]["eval"]
    assert [y for _, y in smooth_series(evals, snap.window)] == pytest.approx(history)
    train = snap.curves["loss"]["train"]
    assert smooth_series(train, snap.window)[-1][1] == pytest.approx(
        sum(y for _, y in train[-5:]) / 5
    )
    board.log()
    csv = (tmp_path / "loss.csv").read_text().splitlines()
    eval_values = [float(line.split(",")[-1]) for line in csv if line.startswith("eval,")]
    assert eval_values == pytest.approx(history)


def test_off_a_terminal_every_stage_line_is_printed_once() -> None:
    out = io.StringIO()
    board = Dashboard(file=out, print_every=0.02, show_memory=False)
    _train(board, epochs=2)
    lines = out.getvalue().splitlines()
    keys = [re.match(r"^(\w+) epoch (\d+)/2 (\d+)/(\d+)", ln) for ln in lines]
    assert all(keys), lines
    counts = [k.groups()[:3] for k in keys if k]
    assert len(counts) == len(set(counts)), f"a line repeated: {lines}"
    for epoch in ("1", "2"):
        assert (("train", epoch, "6")) in counts and (("eval", epoch, "2")) in counts


NEBULAE_SCRIPT = """
from scramjet.compat.nebulae import DashBoard

db = DashBoard(log_path={log!r}, format={{"loss": (".3f", "raw")}}, show_memory=False)
for epoch in range(2):
    for mile in range(4):
        db.gauge({{"loss": 1.0 / (mile + 1)}}, mile, epoch, 4, "train", interval=2)
    db.gauge({{"acc": 0.5}}, 0, epoch, 1, "test")
print("script over")
# no db.close(): the dashboard closes itself at interpreter exit
"""


def test_nebulae_dashboard_prints_no_line_twice_at_exit(tmp_path: Path) -> None:
    script = tmp_path / "aerolog_script.py"
    script.write_text(textwrap.dedent(NEBULAE_SCRIPT.format(log=str(tmp_path / "log"))))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    heads = [" ".join(ln.split(" | ")[0].split()) for ln in lines]
    assert heads == [
        "train epoch 1 2/4",
        "train epoch 1 4/4",
        "test epoch 1 1/1",
        "train epoch 2 2/4",
        "train epoch 2 4/4",
        "test epoch 2 1/1",
        "script over",
    ], done.stdout


def test_gauge_rates_count_only_the_steps_timed() -> None:
    # gauge() is called after a step: the first call of an epoch starts the clock, so its
    # own step was not timed. One step every 0.1 s is 10 steps/s, not 20 after two calls;
    # a stage gauged once per epoch (a test accuracy) has no rate to show.
    board = Dashboard(file=io.StringIO(), show_memory=False)
    for epoch in range(2):
        board.gauge({"loss": 1.0}, 0, epoch, 4, "train", samples=8)
        time.sleep(0.1)
        board.gauge({"loss": 0.9}, 1, epoch, 4, "train", samples=8)
        board.gauge({"acc": 0.5}, 0, epoch, 1, "test")
        stages = {st.name: st for st in board.snapshot().stages}
        assert 40 <= stages["train"].rate <= 82  # 8 samples in >= 0.1 s (was 16)
        assert stages["train"].eta == pytest.approx(0.2, rel=0.5)  # 2 steps at <= 10/s
        assert math.isnan(stages["test"].rate)  # nothing was timed
    line = next(ln for ln in plain_lines(board.snapshot()) if ln.startswith("test"))
    assert line.startswith("test epoch 2 1/1 | -- steps/s | done"), line
    board.close()


def test_tailor_gets_numbers_and_a_failing_format_never_stops_the_loop() -> None:
    out = io.StringIO()
    board = Dashboard(
        file=out,
        show_memory=False,
        format={"acc": ("tailor", lambda v: f"{v:.2f}!"), "bad": ("tailor", lambda v: 1 / 0)},
    )
    with pytest.warns(RuntimeWarning, match="'bad'.*ZeroDivisionError"):
        for mile in range(2):  # a one-element tensor, as gauge() documents
            board.gauge({"acc": torch.tensor([0.25]), "bad": 1.0}, mile, 0, 2, "train")
    board.close()
    line = out.getvalue().splitlines()[-1]
    assert "acc 0.25!" in line and "bad 1" in line, line
    with pytest.raises(ValueError, match="'%d'"):
        Dashboard(format={"acc": ("raw", "%d")})  # not a format() spec: refused at once


def test_text_values_are_shown_but_not_plotted() -> None:
    out = io.StringIO()
    board = Dashboard(file=out, show_memory=False)
    board.gauge({"loss": 0.5, "model": "resnet18"}, 0, 0, 1, "train")
    assert set(board.snapshot().curves) == {"loss"}
    board.close()
    assert "model resnet18" in out.getvalue()


def test_gauge_takes_numpy_integers() -> None:
    import numpy as np

    out = io.StringIO()
    board = Dashboard(file=out, show_memory=False)
    mpe = np.ceil(10 / 4).astype(int)  # 3, a numpy integer, as loops often compute it
    for mile in np.arange(mpe):
        board.gauge({"loss": 0.5}, mile, np.int64(0), mpe, "train", interval=np.int64(1))
    board.close()
    assert out.getvalue().splitlines()[-1].startswith("train epoch 1 3/3 ")
    with pytest.raises(ValueError, match="mile"):
        board.gauge({"loss": 0.5}, 1.5, 0, 3, "train")  # type: ignore[arg-type]
