"""Watching a run: what the progress lines, the dashboard and the messages say, in less
common but realistic settings (a second phase, streams, odd arguments)."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import TinyMLP, blobs, make_trainer
from torch.utils.data import IterableDataset, TensorDataset

from scramjet import Trainer
from scramjet.callbacks import (
    EarlyStoppingCallback,
    ProgressBarCallback,
    StepBasedEvaluationCallback,
    TrainerCallback,
)
from scramjet.dashboard import Dashboard


class Stream(IterableDataset[tuple[torch.Tensor, torch.Tensor]]):
    """``n`` samples of the blobs, as a stream without a length."""

    def __init__(self, n: int = 24) -> None:
        self.data = blobs(n=n)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for i in range(len(self.data)):
            yield self.data[i]


class ScriptedScore(Trainer):
    """Records a scripted ``score`` at each epoch end, so a test controls the metric."""

    scores: list[float] = []

    def train_epoch_end(self) -> None:
        super().train_epoch_end()
        self.run_history.update_metric("score", self.scores[self.state.epoch])


# ----------------------------------------------------------------------------- a second phase


def test_a_second_phase_counts_its_epochs_against_the_epochs_it_shows() -> None:
    out = io.StringIO()
    trainer = make_trainer(TinyMLP(), callbacks=[ProgressBarCallback(file=out, interval=60)])
    trainer.train(blobs(n=8), num_epochs=2, per_device_batch_size=4)
    before = len(out.getvalue().splitlines())
    trainer.train(blobs(n=8), num_epochs=2, per_device_batch_size=4, reset_run_history=False)
    heads = [line.split(" train")[0] for line in out.getvalue().splitlines()[before:]]
    # The history numbers the phase's epochs 3 and 4 (as the metric lines do): of 4 in all.
    assert heads == ["epoch 3/4", "epoch 4/4"], heads


def test_early_stopping_in_a_second_phase_names_an_epoch_within_the_total() -> None:
    stopper = EarlyStoppingCallback(1, early_stopping_threshold=0.0, watch_metric="score")
    cls = type("Scripted", (ScriptedScore,), {"scores": [1.0, 2.0, 3.0]})  # by run epoch
    trainer = make_trainer(TinyMLP(), callbacks=[stopper], trainer_cls=cls)
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        trainer.train(
            blobs(n=8), num_epochs=3, per_device_batch_size=4,
            reset_run_history=False,
        )  # fmt: skip
    # The phase's 2nd epoch is the history's 3rd (of 1 + 3): the message says so.
    assert "Early stopping at epoch 3/4:" in printed.getvalue(), printed.getvalue()


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "kwargs", [{"interval": 0}, {"interval": -1.0}, {"interval": "5"}, {"refresh_per_second": 0}]
)
def test_the_progress_bar_refuses_a_period_that_is_not_a_positive_number(
    kwargs: dict[str, object],
) -> None:
    with pytest.raises(ValueError, match=r"must be a number > 0; received "):
        ProgressBarCallback(**kwargs)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- dashboard


def test_the_dashboard_places_the_epochs_of_a_stream_on_the_epoch_axis() -> None:
    board = Dashboard(file=io.StringIO(), show_memory=False, window=3, print_every=60)
    trainer = make_trainer(TinyMLP(), callbacks=[board])
    trainer.train(Stream(24), num_epochs=2, per_device_batch_size=4, eval_dataset=Stream(8))
    curves = board.snapshot().curves["loss"]
    train_x = [x for x, _ in curves["train"]]
    # 6 batches per epoch, found out as each epoch ended: placed as for a sized dataset,
    assert train_x == pytest.approx([e + (m + 1) / 6 for e in range(2) for m in range(6)])
    # so each evaluation sits at the end of its epoch, not next to the first steps.
    assert [x for x, _ in curves["eval"]] == [1.0, 2.0]
    train = {s.name: s for s in board.snapshot().stages}["train"]
    assert (train.done, train.total, train.finished) == (6, 6, True)


def test_the_dashboard_smooths_the_losses_of_a_stream() -> None:
    board = Dashboard(file=io.StringIO(), show_memory=False, window=3, print_every=60)
    trainer = make_trainer(TinyMLP(), callbacks=[board])
    trainer.train(Stream(24), num_epochs=1, per_device_batch_size=4)
    from scramjet.dashboard._plot import smooths

    assert smooths(board.snapshot().curves["loss"]["train"]), "window=3 must apply"


class SnapshotAt(TrainerCallback):
    """Takes the board's curve points after training batch ``at`` of the first epoch."""

    def __init__(self, board: Dashboard, at: int) -> None:
        self.board, self.at, self.xs = board, at, [0.0]

    def on_train_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.epoch == 0 and trainer.state.batches_seen_in_epoch + 1 == self.at:
            self.xs = [x for x, _ in self.board.snapshot().curves["loss"]["train"]]


def test_a_long_first_epoch_of_a_stream_stays_inside_that_epoch_while_it_runs() -> None:
    board = Dashboard(file=io.StringIO(), show_memory=False, span=200, print_every=60)
    probe = SnapshotAt(board, 100)  # more batches than the dashboard first assumes
    trainer = make_trainer(TinyMLP(), callbacks=[board, probe])
    trainer.train(Stream(4 * 120), num_epochs=1, per_device_batch_size=4)
    assert len(probe.xs) == 100
    assert all(0 < a < b <= 1 for a, b in zip(probe.xs, probe.xs[1:])), probe.xs
    steps = {round(b - a, 9) for a, b in zip(probe.xs, probe.xs[1:])}
    assert len(steps) == 1, "evenly spaced, one column each"


def test_a_chosen_curve_without_values_says_so_and_names_the_curves_that_have_them() -> None:
    from rich.console import Console

    from scramjet.dashboard._view import LiveView

    # The history's name (eval_loss_epoch) is not a curve's name: its points are on 'loss'.
    board = Dashboard(file=io.StringIO(), show_memory=False, curves=["eval_loss_epoch"])
    trainer = make_trainer(TinyMLP(), callbacks=[board])
    trainer.train(blobs(n=8), num_epochs=1, per_device_batch_size=4, eval_dataset=blobs(n=4))
    screen = Console(width=100, file=io.StringIO(), force_terminal=False)
    screen.print(LiveView(board.snapshot))
    text = screen.file.getvalue()  # type: ignore[attr-defined]
    assert "eval_loss_epoch: no values recorded yet (curves with values: 'loss')" in text, text


def test_evaluations_every_n_steps_are_drawn_where_and_as_they_happened(tmp_path: Path) -> None:
    from scramjet.dashboard._plot import render_curve, smooth_series
    from scramjet.dashboard._view import fitted_curve

    board = Dashboard(log_path=str(tmp_path), file=io.StringIO(), show_memory=False, window=3)
    trainer = make_trainer(TinyMLP(), callbacks=[board, StepBasedEvaluationCallback(2)])
    trainer.train(blobs(n=24), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=8))
    evals = trainer.run_history.get_metric_values("eval_loss_epoch")
    snap = board.snapshot()
    curve = snap.curves["loss"]
    # 6 batches per epoch, an evaluation after every 2nd: at 1/3, 2/3 and the end of each.
    assert [x for x, _ in curve["eval"]] == pytest.approx([k / 3 for k in range(1, 7)])
    assert [v for _, v in curve["eval"]] == pytest.approx(evals)
    # Each evaluation is drawn as it is; only the per-step training losses are averaged.
    _, drawn = fitted_curve(curve, snap, 200, "loss")
    want = {"train": smooth_series(curve["train"], 3), "eval": curve["eval"]}
    assert drawn == render_curve(want, span=snap.span, divisor=snap.divisor, window=1)
    board.log(gauge=False)
    rows = [r.split(",") for r in (tmp_path / "loss.csv").read_text().splitlines()]
    assert [int(r[3]) for r in rows if r[0] == "eval"] == [2, 4, 6, 8, 10, 12], "after its step"


class CrashAtStep(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            raise RuntimeError("killed")


def test_a_batch_limit_resumed_mid_epoch_counts_the_batches_the_epoch_already_ran(
    tmp_path: Path,
) -> None:
    from scramjet.callbacks import CallbackError, LimitBatchesCallback, SaveTrainingStateCallback

    def run(*extra: TrainerCallback, resume: bool = False) -> Trainer:
        saver = SaveTrainingStateCallback(tmp_path, every_n_steps=1, async_write=False)
        trainer = make_trainer(TinyMLP(), callbacks=[LimitBatchesCallback(3), saver, *extra])
        trainer.train(
            blobs(n=32), num_epochs=3, per_device_batch_size=4,
            resume_from=tmp_path if resume else None,
        )  # fmt: skip
        return trainer

    with pytest.raises(CallbackError, match="killed"):
        run(CrashAtStep(5))  # killed after the 2nd of the 3 batches of epoch 2
    resumed = run(resume=True)
    assert resumed.state.global_step == 9, "3 epochs of 3 batches, as without the crash"


class SlowEvaluation(Trainer):
    def calculate_train_batch_loss(self, batch: Any) -> dict[str, Any]:
        time.sleep(0.01)
        return super().calculate_train_batch_loss(batch)

    def calculate_eval_batch_loss(self, batch: Any) -> dict[str, Any]:
        time.sleep(0.05)
        return super().calculate_eval_batch_loss(batch)


class Clock(TrainerCallback):
    """Wall time of the training epoch and of the evaluations inside it."""

    def __init__(self) -> None:
        self.epoch, self.evals, self._t = 0.0, 0.0, 0.0

    def on_train_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self.epoch = -time.perf_counter()

    def on_train_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        self.epoch += time.perf_counter()

    def on_eval_epoch_start(self, trainer: Trainer, **kwargs: Any) -> None:
        self._t = time.perf_counter()

    def on_eval_epoch_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.batches_seen_in_epoch < trainer.batches_in_epoch:  # inside the epoch
            self.evals += time.perf_counter() - self._t


def test_the_dashboards_training_rate_leaves_out_evaluations_inside_the_epoch() -> None:
    board, clock = Dashboard(file=io.StringIO(), show_memory=False, print_every=60), Clock()
    callbacks = [board, clock, StepBasedEvaluationCallback(2)]
    trainer = make_trainer(TinyMLP(), callbacks=callbacks, trainer_cls=SlowEvaluation)
    trainer.train(blobs(n=32), num_epochs=1, per_device_batch_size=4, eval_dataset=blobs(n=8))
    train = {s.name: s for s in board.snapshot().stages}["train"]
    assert clock.evals > clock.epoch / 2, "3 evaluations of 0.1 s take most of the epoch"
    assert train.rate == pytest.approx(32 / (clock.epoch - clock.evals), rel=0.3)


def test_the_dashboard_shows_a_run_stopped_inside_an_epoch_as_ended_early() -> None:
    from scramjet.callbacks import TerminateOnNaNCallback

    x, y = blobs(n=40).tensors
    x = x.clone()
    x[17, 0] = float("nan")  # in the 5th batch of 4
    out = io.StringIO()
    board = Dashboard(file=out, show_memory=False, print_every=60)
    guard = TerminateOnNaNCallback(check_every=1, raise_error=False)
    trainer = make_trainer(TinyMLP(), callbacks=[board, guard])
    with contextlib.redirect_stdout(io.StringIO()):  # the guard's message
        trainer.train(
            TensorDataset(x, y), num_epochs=2, per_device_batch_size=4,
            train_dataloader_kwargs={"shuffle": False},
        )  # fmt: skip
    (line,) = out.getvalue().splitlines()
    # Where it stopped, and no time left as if the epoch were still running.
    assert line.startswith("train epoch 1/2 4/10 | ") and "| ended early |" in line, line
    assert "ETA" not in line, line
