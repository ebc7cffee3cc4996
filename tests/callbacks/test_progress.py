"""Behaviour of the reporting callbacks: metric lines, plain progress lines, the progress bar."""

from __future__ import annotations

import io
import re
import time
from typing import Any

import torch
from tests.common.world import TinyMLP, blobs, make_trainer

from scramjet import Trainer
from scramjet.callbacks import LogMetricsCallback, PrintProgressCallback, ProgressBarCallback


def test_log_metrics_prints_every_metric_each_epoch() -> None:
    out = io.StringIO()
    trainer = make_trainer(TinyMLP(), callbacks=[LogMetricsCallback(file=out)])
    trainer.train(blobs(n=12), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=6))
    lines = out.getvalue().splitlines()
    history = trainer.run_history
    assert len(lines) == 2
    for epoch, line in enumerate(lines):
        train = history.get_metric_values("train_loss_epoch")[epoch]
        evals = history.get_metric_values("eval_loss_epoch")[epoch]
        assert (
            line
            == f"epoch {epoch + 1} | eval_loss_epoch: {evals:.4g} | train_loss_epoch: {train:.4g}"
        )
    trainer.evaluate(blobs(n=6))
    # a stand-alone evaluation is labelled with the last epoch trained
    assert out.getvalue().splitlines()[-1].startswith("epoch 2 | eval_loss_epoch: ")
    assert "train_loss_epoch" not in out.getvalue().splitlines()[-1]


def test_print_progress_lines_in_order() -> None:
    out = io.StringIO()
    trainer = make_trainer(TinyMLP(), callbacks=[PrintProgressCallback(file=out)])
    trainer.train(blobs(n=8), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=4))
    assert out.getvalue().splitlines() == [
        "Starting training run",
        "Starting epoch 1",
        "Finished epoch 1",
        "Starting evaluation",
        "Finished evaluation",
        "Starting epoch 2",
        "Finished epoch 2",
        "Starting evaluation",
        "Finished evaluation",
        "Finished training run",
    ]


class Slow(Trainer):
    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        time.sleep(0.03)
        return super().calculate_train_batch_loss(batch)


LINE = re.compile(
    r"^epoch (\d+)/2 train (\d+)/(\d+)(?: \| loss [\d.e+-]+)? \| ([\d,]+) samples/s \| ETA (\S+)$"
)


def test_progress_bar_prints_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    bar = ProgressBarCallback(file=out, interval=0.05)
    trainer = make_trainer(TinyMLP(), callbacks=[bar], trainer_cls=Slow)
    trainer.train(blobs(n=32), num_epochs=2, per_device_batch_size=4)
    text = out.getvalue()
    assert "\x1b" not in text, "no terminal control codes in a log file"
    lines = text.splitlines()
    assert all(LINE.match(line) for line in lines), lines
    parsed = [LINE.match(line).groups() for line in lines]  # type: ignore[union-attr]
    assert len(lines) > 4, "periodic lines besides the two epoch-end ones"
    finals = [p for p in parsed if p[1] == p[2] == "8"]
    assert sorted(p[0] for p in finals) == ["1", "2"], "each epoch ends with one complete line"
    # 4 samples per ~30 ms batch: on the order of 100 samples/s, certainly not zero.
    rates = [int(p[3].replace(",", "")) for p in finals]
    assert all(20 < r < 1000 for r in rates), rates
    assert bar._display is None, "the display thread stops with the epoch"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_on_a_terminal() -> None:
    out = FakeTTY()
    bar = ProgressBarCallback(file=out, refresh_per_second=50)
    trainer = make_trainer(TinyMLP(), callbacks=[bar], trainer_cls=Slow)
    trainer.train(blobs(n=12), num_epochs=1, per_device_batch_size=4)
    text = out.getvalue()
    assert "samples/s" in text and "epoch 1/1 train 3/3" in text
    assert bar._display is None, "the live display is stopped at the end of the epoch"


def test_a_crashed_run_stops_the_progress_display() -> None:
    import threading

    def broken_loss(outputs: Any, targets: Any) -> Any:
        raise RuntimeError("boom")

    out = io.StringIO()
    bar, log = ProgressBarCallback(file=out, interval=0.01), LogMetricsCallback(file=out)
    trainer = make_trainer(TinyMLP(), loss=broken_loss, callbacks=[bar, log])
    try:
        trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    except RuntimeError as err:
        assert "boom" in str(err)
    else:  # pragma: no cover - the loss always raises
        raise AssertionError("train() should have raised")
    assert bar._display is None
    assert "scramjet-progress" not in {t.name for t in threading.enumerate()}
    printed = out.getvalue()
    time.sleep(0.05)
    assert out.getvalue() == printed, "nothing keeps printing after the crash"
    # The trainer is usable again, and a standalone evaluation logs its metrics.
    trainer.loss_func = torch.nn.CrossEntropyLoss()
    trainer.evaluate(blobs(n=4))
    assert "eval_loss_epoch" in out.getvalue()
