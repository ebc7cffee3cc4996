"""What a user watching a run sees: why and where it stopped, and numbers that match the run."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest
from tests.common.world import TinyMLP, blobs, make_trainer
from torch.utils.data import TensorDataset

from scramjet import StopTrainingError, Trainer
from scramjet.callbacks import (
    CallbackError,
    EarlyStoppingCallback,
    LogMetricsCallback,
    ProgressBarCallback,
    SaveTrainingStateCallback,
    TerminateOnNaNCallback,
    TrainerCallback,
)
from scramjet.dashboard import Dashboard


class ScriptedScore(Trainer):
    """Records a scripted ``score`` at each epoch end, so a test controls the metric."""

    scores: list[float] = []

    def train_epoch_end(self) -> None:
        super().train_epoch_end()
        epoch = len(self.run_history.get_metric_values("score"))
        self.run_history.update_metric("score", self.scores[epoch])


def _scripted(scores: list[float]) -> type[Trainer]:
    return type("Scripted", (ScriptedScore,), {"scores": scores})


def _with_nan_at(index: int, n: int = 40) -> TensorDataset:
    x, y = blobs(n=n).tensors
    x = x.clone()
    x[index, 0] = float("nan")
    return TensorDataset(x, y)


# ----------------------------------------------------------------------------- stopping


def test_early_stopping_prints_why_and_at_which_epoch_the_run_stopped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stopper = EarlyStoppingCallback(2, early_stopping_threshold=0.01, watch_metric="score")
    cls = _scripted([1.0, 0.5, 0.6, 0.495, 0.7, 0.1])
    trainer = make_trainer(TinyMLP(), callbacks=[stopper], trainer_cls=cls)
    trainer.train(blobs(n=8), num_epochs=6, per_device_batch_size=4)
    printed = capsys.readouterr().out
    assert isinstance(trainer.stop_reason, StopTrainingError)
    # The user sees the reason, the epoch, the latest value and why it did not count.
    assert str(trainer.stop_reason) in printed, printed
    assert "epoch 4/6" in printed and "0.495" in printed and "0.01" in printed, printed
    assert "score has not improved on 0.5 for 2 epoch(s)" in printed


def test_the_nan_guard_without_raising_prints_why_the_run_stopped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    guard = TerminateOnNaNCallback(check_every=4, raise_error=False)
    trainer = make_trainer(TinyMLP(), callbacks=[guard])
    trainer.train(
        _with_nan_at(9),
        num_epochs=2,
        per_device_batch_size=4,
        train_dataloader_kwargs={"shuffle": False},
    )
    printed = capsys.readouterr().out
    assert trainer.stop_reason is not None
    assert str(trainer.stop_reason) in printed and "batch 3 of epoch 1" in printed, printed


def test_the_nan_guard_raising_prints_nothing_besides_the_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    trainer = make_trainer(TinyMLP(), callbacks=[TerminateOnNaNCallback(check_every=4)])
    with pytest.raises(StopTrainingError):
        trainer.train(
            _with_nan_at(9), num_epochs=1, per_device_batch_size=4,
            train_dataloader_kwargs={"shuffle": False},
        )  # fmt: skip
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(("accumulation", "steps_before"), [(1, 2), (2, 1)])
def test_the_nan_message_counts_the_updates_made_before_the_bad_batch(
    accumulation: int, steps_before: int
) -> None:
    # Sample 9 is in batch 3; the group of 8 batches is checked after batch 8, when more
    # updates have been made: the message must count those made before batch 3.
    trainer = make_trainer(TinyMLP(), callbacks=[TerminateOnNaNCallback(check_every=8)])
    with pytest.raises(StopTrainingError) as info:
        trainer.train(
            _with_nan_at(9), num_epochs=1, per_device_batch_size=4,
            gradient_accumulation_steps=accumulation,
            train_dataloader_kwargs={"shuffle": False},
        )  # fmt: skip
    assert f"batch 3 of epoch 1 (after {steps_before} optimizer steps)" in str(info.value)


# ----------------------------------------------------------------------------- progress bar


def _lines(out: io.StringIO) -> list[str]:
    text = out.getvalue()
    assert "\x1b" not in text, "no terminal control codes off a terminal"
    return text.splitlines()


def test_the_progress_bar_shows_a_loss_that_became_nan() -> None:
    out = io.StringIO()
    trainer = make_trainer(TinyMLP(), callbacks=[ProgressBarCallback(file=out, interval=60)])
    trainer.train(
        _with_nan_at(9), num_epochs=1, per_device_batch_size=4,
        train_dataloader_kwargs={"shuffle": False},
    )  # fmt: skip
    (line,) = _lines(out)
    assert line.startswith("epoch 1/1 train 10/10 | loss nan | "), line


def test_a_run_stopped_mid_epoch_leaves_the_epochs_last_progress_line() -> None:
    out = io.StringIO()
    guard = TerminateOnNaNCallback(check_every=2, raise_error=False)
    bar = ProgressBarCallback(file=out, interval=60)
    trainer = make_trainer(TinyMLP(), callbacks=[guard, bar])
    trainer.train(
        _with_nan_at(9), num_epochs=2, per_device_batch_size=4,
        train_dataloader_kwargs={"shuffle": False},
    )  # fmt: skip
    progress = [line for line in _lines(out) if line.startswith("epoch ")]
    assert len(progress) == 1, progress
    # Batch 4 closes the checked group: 3 batches were applied, the loss includes the NaN.
    assert re.match(r"epoch 1/2 train 3/10 \| loss nan \| [\d,]+ samples/s \| ended early$",
                    progress[0]), progress  # fmt: skip
    assert bar._display is None


class HalvedEpochLoss(Trainer):
    """Records half the per-sample mean as the epoch loss, as a reduction over other
    processes' losses can make it differ from what this process saw."""

    def train_epoch_end(self) -> None:
        self.run_history.update_metric("train_loss_epoch", self.train_losses.mean(self.device) / 2)

    def eval_epoch_end(self) -> None:
        self.run_history.update_metric("eval_loss_epoch", self.eval_losses.mean(self.device) / 2)


def test_the_last_progress_line_of_a_stage_shows_the_loss_that_was_recorded() -> None:
    out = io.StringIO()
    callbacks = [ProgressBarCallback(file=out, interval=60), LogMetricsCallback(file=out)]
    trainer = make_trainer(TinyMLP(), callbacks=callbacks, trainer_cls=HalvedEpochLoss)
    trainer.train(blobs(n=16), num_epochs=2, per_device_batch_size=4, eval_dataset=blobs(n=8))
    trainer.evaluate(blobs(n=8), per_device_batch_size=4)
    history = trainer.run_history
    shown = [
        (m.group(1), m.group(2), float(m.group(3)))
        for line in _lines(out)
        if (m := re.match(r"^(?:epoch (\d)/2 )?(train|eval) \d+/\d+ \| loss ([^ ]+) \|", line))
    ]
    train, evals = (history.get_metric_values(f"{s}_loss_epoch") for s in ("train", "eval"))
    want = [("1", "train", train[0]), ("1", "eval", evals[0])]
    want += [("2", "train", train[1]), ("2", "eval", evals[1]), (None, "eval", evals[2])]
    assert [(e, s) for e, s, _ in shown] == [(e, s) for e, s, _ in want]
    # Printed with 4 significant digits: the recorded values, not the running means.
    assert [v for *_, v in shown] == pytest.approx([v for *_, v in want], rel=1e-3)


_TWO_RANKS_JOB = """
import sys
import torch
from torch import nn
from torch.utils.data import TensorDataset
from scramjet import Trainer
from scramjet.callbacks import EarlyStoppingCallback, LogMetricsCallback, ProgressBarCallback
from scramjet.runtime import distributed as dist

torch.manual_seed(0)
x = torch.randn(64, 4)
y = x.sum(1, keepdim=True) * (1 + torch.arange(64).unsqueeze(1) % 2)  # ranks see other losses
model = nn.Linear(4, 1)
callbacks = [ProgressBarCallback(interval=60), LogMetricsCallback(),
             EarlyStoppingCallback(1, 1e9)]
trainer = Trainer(model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.01),
                  callbacks=callbacks)
trainer.train(TensorDataset(x, y), num_epochs=3, per_device_batch_size=4,
              eval_dataset=TensorDataset(x[:16], y[:16]),
              train_dataloader_kwargs={"shuffle": False})
"""


@pytest.mark.slow
@pytest.mark.distributed
def test_two_processes_print_each_line_once_with_the_losses_logged(tmp_path: Path) -> None:
    from tests.common.torchrun import run_torchrun

    job = tmp_path / "job.py"
    job.write_text(_TWO_RANKS_JOB)
    done = run_torchrun(job, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    progress = [line for line in lines if re.match(r"epoch \d/3 (train|eval) ", line)]
    logged = [line for line in lines if re.match(r"epoch \d \| ", line)]
    stops = [line for line in lines if line.startswith("Early stopping at epoch 2/3: ")]
    assert len(progress) == 4 and len(logged) == 2 and len(stops) == 1, lines
    for epoch, metrics in enumerate(logged, start=1):
        # the bar's last loss of each stage is the one logged (reduced over both ranks)
        for stage in ("train", "eval"):
            want = re.search(rf"{stage}_loss_epoch: (\S+)", metrics).group(1)  # type: ignore[union-attr]
            bar = next(p for p in progress if p.startswith(f"epoch {epoch}/3 {stage} "))
            assert f"| loss {want} |" in bar, (bar, metrics)


# ----------------------------------------------------------------------------- dashboard


def test_the_dashboard_labels_an_evaluation_after_an_early_stop_with_the_last_epoch() -> None:
    out = io.StringIO()
    board = Dashboard(file=out, show_memory=False)
    stopper = EarlyStoppingCallback(1, early_stopping_threshold=0.0, watch_metric="score")
    cls = _scripted([1.0, 2.0, 0.5])
    trainer = make_trainer(TinyMLP(), callbacks=[board, stopper], trainer_cls=cls)
    with contextlib.redirect_stdout(io.StringIO()):  # the stop message
        trainer.train(blobs(n=8), num_epochs=3, per_device_batch_size=4)
    assert trainer.run_history.get_metric_values("score") == [1.0, 2.0], "stopped in epoch 2"
    before = out.getvalue()
    trainer.evaluate(blobs(n=8), per_device_batch_size=4)
    (line,) = out.getvalue()[len(before) :].splitlines()
    assert line.startswith("eval epoch 2 2/2 "), line
    eval_x = [x for x, _ in board.snapshot().curves["loss"]["eval"]]
    assert eval_x == [2.0], "the evaluation is placed at the end of epoch 2"


def test_callbacks_after_an_early_stop_still_see_the_last_epoch(tmp_path: Path) -> None:
    out = io.StringIO()
    stopper = EarlyStoppingCallback(1, early_stopping_threshold=0.0, watch_metric="score")
    saver = SaveTrainingStateCallback(tmp_path, every_n_epochs=1, async_write=False)
    callbacks = [stopper, LogMetricsCallback(file=out), saver]
    trainer = make_trainer(TinyMLP(), callbacks=callbacks, trainer_cls=_scripted([1.0, 2.0, 0.5]))
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train(blobs(n=8), num_epochs=3, per_device_batch_size=4)
    assert trainer.run_history.get_metric_values("score") == [1.0, 2.0]
    lines = out.getvalue().splitlines()
    assert [line.split(" |")[0] for line in lines] == ["epoch 1", "epoch 2"], lines
    assert any(p.name.endswith("step4.pt") for p in tmp_path.iterdir()), "epoch 2's checkpoint"


class CrashAtStep(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_optimizer_step_end(self, trainer: Trainer, **kwargs: Any) -> None:
        if trainer.state.global_step == self.step:
            raise RuntimeError("killed")


def test_the_dashboard_of_a_resumed_run_places_its_losses_where_the_run_resumed(
    tmp_path: Path,
) -> None:
    data, directory = blobs(n=24), tmp_path / "ckpt"  # 6 batches per epoch
    saver = SaveTrainingStateCallback(directory, every_n_steps=1, async_write=False)
    first = make_trainer(TinyMLP(), callbacks=[saver, CrashAtStep(9)], seed=0)
    with pytest.raises(CallbackError, match="killed"):
        first.train(data, num_epochs=2, per_device_batch_size=4)
    board = Dashboard(log_path=str(tmp_path / "log"), file=io.StringIO(), show_memory=False)
    second = make_trainer(TinyMLP(), callbacks=[board], seed=0)
    second.train(data, num_epochs=2, per_device_batch_size=4, resume_from=directory)
    board.log(gauge=False)
    rows = (tmp_path / "log" / "loss.csv").read_text().splitlines()[1:]
    # The checkpoint of step 9 is not written (the crash comes first): the run resumes
    # after step 8, i.e. at the 3rd batch of epoch 2.
    assert [tuple(r.split(",")[:4]) for r in rows] == [
        ("train", "1", str(mile), str(6 + mile + 1)) for mile in range(2, 6)
    ]
    xs = [x for x, _ in board.snapshot().curves["loss"]["train"]]
    assert xs == pytest.approx([1 + (mile + 1) / 6 for mile in range(2, 6)])
