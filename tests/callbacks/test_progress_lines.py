"""The progress bar off a terminal: epoch n/N, running loss, an evaluation bar, no repeats."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch.utils.data import IterableDataset

from scramjet import Trainer
from scramjet.callbacks import ProgressBarCallback, TrainerCallback

LINE = re.compile(
    r"^(?:epoch (?P<epoch>\d+)/(?P<epochs>\d+) )?(?P<stage>train|eval) "
    r"(?P<done>\d+)(?:/(?P<total>\d+)| batches)"
    r"(?: \| loss (?P<loss>[^ |]+))? \| (?P<rate>[\d,]+) samples/s"
    r"(?: \| ETA (?P<eta>\S+)| \| (?P<early>ended early))?$"
)


class SlowSteps(Trainer):
    """Each train and eval batch takes a few milliseconds, so periodic lines appear."""

    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        time.sleep(0.01)
        return super().calculate_train_batch_loss(batch)

    def calculate_eval_batch_loss(self, batch: Any) -> dict[str, Any]:
        time.sleep(0.04)
        return super().calculate_eval_batch_loss(batch)


class SlowEpochEnd(TrainerCallback):
    """Holds the end of each stage long enough for several display ticks to pass."""

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        time.sleep(0.15)

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        time.sleep(0.15)


def _parse(text: str) -> list[dict[str, Any]]:
    assert "\x1b" not in text, "no terminal control codes in a log"
    rows = []
    for line in text.splitlines():
        match = LINE.match(line)
        assert match, f"not a progress line: {line!r}"
        rows.append(match.groupdict())
    return rows


def _finals(rows: list[dict[str, Any]], stage: str, total: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["stage"] == stage and r["done"] == total]


def test_each_stage_ends_with_exactly_one_line_and_the_epoch_loss() -> None:
    out = io.StringIO()
    # SlowEpochEnd runs before the bar's own epoch-end handler: the display thread ticks
    # several times after the last batch, when the count no longer changes.
    callbacks = [SlowEpochEnd(), ProgressBarCallback(file=out, interval=0.02)]
    trainer = make_trainer(TinyMLP(), callbacks=callbacks, trainer_cls=SlowSteps)
    trainer.train(blobs(n=48), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=24))
    rows = _parse(out.getvalue())
    history = trainer.run_history
    for epoch in (1, 2):
        mine = [r for r in rows if r["epoch"] == str(epoch)]
        assert all(r["epochs"] == "2" for r in mine), "epoch n/N"
        train, evals = _finals(mine, "train", "12"), _finals(mine, "eval", "6")
        assert len(train) == 1 and len(evals) == 1, mine
        # The running loss ends at the per-sample mean of the epoch: the epoch's metric.
        want_train = history.get_metric_values("train_loss_epoch")[epoch - 1]
        want_eval = history.get_metric_values("eval_loss_epoch")[epoch - 1]
        assert float(train[0]["loss"]) == pytest.approx(want_train, rel=1e-3)
        assert float(evals[0]["loss"]) == pytest.approx(want_eval, rel=1e-3)
        assert train[0]["eta"] == "0s" and evals[0]["eta"] == "0s"
    stages = [r["stage"] for r in rows]
    assert stages.index("eval") > stages.index("train")
    running_evals = [r for r in rows if r["stage"] == "eval" and r["done"] != "6"]
    assert running_evals, "lines printed while the evaluation ran"
    assert all(r["total"] == "6" and r["eta"] for r in running_evals), running_evals
    counts = [(r["epoch"], r["stage"], r["done"]) for r in rows]
    assert len(counts) == len(set(counts)), "no line repeats the same count"


def test_a_standalone_evaluation_has_a_bar_without_an_epoch() -> None:
    out = io.StringIO()
    trainer = make_trainer(TinyMLP(), callbacks=[ProgressBarCallback(file=out, interval=0.02)])
    trainer.evaluate(blobs(n=12), per_device_batch_size=4)
    rows = _parse(out.getvalue())
    assert [(r["epoch"], r["stage"], r["done"], r["total"]) for r in rows] == [
        (None, "eval", "3", "3")
    ]
    want = trainer.run_history.get_latest_metric("eval_loss_epoch")
    assert float(rows[0]["loss"]) == pytest.approx(want, rel=1e-3)


class EvaluateMidEpoch(TrainerCallback):
    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == 3:
            trainer.run_evaluation()


def test_a_mid_epoch_evaluation_pauses_the_training_bar() -> None:
    out = io.StringIO()
    callbacks = [ProgressBarCallback(file=out, interval=0.02), EvaluateMidEpoch()]
    trainer = make_trainer(TinyMLP(), callbacks=callbacks, trainer_cls=SlowSteps)
    trainer.train(blobs(n=24), num_epochs=1, per_device_batch_size=4, eval_dataset=blobs(n=8))
    rows = _parse(out.getvalue())
    order = [(r["stage"], r["done"]) for r in rows if r["done"] in (r["total"], "3")]
    # train reaches 3, the evaluation runs (2 batches, twice), the train bar continues.
    assert order.count(("eval", "2")) == 2 and order.count(("train", "6")) == 1, rows
    first_eval = next(i for i, r in enumerate(rows) if r["stage"] == "eval")
    assert all(int(r["done"]) <= 3 for r in rows[:first_eval] if r["stage"] == "train")
    assert rows[-1]["stage"] == "eval", "the epoch-end evaluation comes last"
    train_after = [r for r in rows[first_eval:] if r["stage"] == "train"]
    assert train_after and train_after[-1]["done"] == "6"


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """A stream without a length."""

    def __init__(self, n: int) -> None:
        self.data = blobs(n=n)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for i in range(len(self.data)):
            time.sleep(0.002)
            yield self.data[i]


def test_data_without_a_length_shows_a_running_count_and_no_eta() -> None:
    out = io.StringIO()
    trainer = make_trainer(TinyMLP(), callbacks=[ProgressBarCallback(file=out, interval=0.01)])
    trainer.train(Stream(40), num_epochs=1, per_device_batch_size=4, eval_dataset=Stream(16))
    rows = _parse(out.getvalue())
    assert rows and all(r["total"] is None and r["eta"] is None for r in rows), rows
    assert "ETA" not in out.getvalue()
    train = [int(r["done"]) for r in rows if r["stage"] == "train"]
    evals = [int(r["done"]) for r in rows if r["stage"] == "eval"]
    assert train[-1] == 10 and train == sorted(set(train))
    assert evals[-1] == 4 and evals == sorted(set(evals))


class EndEpochEarly(TrainerCallback):
    """Ends each training epoch after its 4th batch."""

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.steps = 0

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.steps += 1
        if self.steps == 4:
            trainer.end_epoch()


def test_an_epoch_ended_early_says_so_instead_of_a_time_left() -> None:
    out = io.StringIO()
    callbacks = [ProgressBarCallback(file=out, interval=60), EndEpochEarly()]
    trainer = make_trainer(TinyMLP(), callbacks=callbacks)
    trainer.train(blobs(n=40), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=8))
    rows = _parse(out.getvalue())
    trains = [r for r in rows if r["stage"] == "train"]
    assert [(r["epoch"], r["done"], r["total"], r["early"]) for r in trains] == [
        ("1", "4", "10", "ended early"),
        ("2", "4", "10", "ended early"),
    ]
    evals = [r for r in rows if r["stage"] == "eval"]
    assert [(r["done"], r["eta"], r["early"]) for r in evals] == [("2", "0s", None)] * 2


class SlowEvaluation(Trainer):
    """Training batches are quick; each evaluation batch takes 0.3 s."""

    def calculate_eval_batch_loss(self, batch: Any) -> dict[str, Any]:
        time.sleep(0.3)
        return super().calculate_eval_batch_loss(batch)


def test_a_mid_epoch_evaluation_does_not_count_in_the_training_rate() -> None:
    from scramjet.callbacks import StepBasedEvaluationCallback

    out = io.StringIO()
    bar = ProgressBarCallback(file=out, interval=60.0)
    callbacks = [bar, StepBasedEvaluationCallback(2)]
    trainer = make_trainer(TinyMLP(), callbacks=callbacks, trainer_cls=SlowEvaluation)
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=4, eval_dataset=blobs(n=8))
    rows = _parse(out.getvalue())
    final = _finals(rows, "train", "4")[-1]
    # 16 samples; the evaluation after update 2 took 0.6 s. Counted in, the rate would be
    # below 16 / 0.6 ≈ 27 samples/s; training alone runs far faster.
    assert int(final["rate"].replace(",", "")) > 60, out.getvalue()
