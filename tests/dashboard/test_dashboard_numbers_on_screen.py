"""Watching a run with the Dashboard the way a user does: what each number on screen says,
in a second phase, on a narrow terminal, with values of every size."""

from __future__ import annotations

import io
from typing import Any

import pytest
from tests.common.world import TinyMLP, blobs, make_trainer

from scramjet.callbacks import LogMetricsCallback, ProgressBarCallback, TrainerCallback
from scramjet.callbacks.base import CallbackError
from scramjet.dashboard import Dashboard


def _board(out: io.StringIO) -> Dashboard:
    return Dashboard(file=out, show_memory=False, print_every=600)


# ----------------------------------------------------------------------------- a second phase


def test_a_second_phase_without_a_history_reset_numbers_epochs_as_the_history_does() -> None:
    out = io.StringIO()
    board = _board(out)
    trainer = make_trainer(TinyMLP(), callbacks=[board, LogMetricsCallback(file=out)])
    trainer.train(blobs(n=16), num_epochs=2, per_device_batch_size=8, eval_dataset=blobs(n=8))
    trainer.train(
        blobs(n=16),
        num_epochs=2,
        per_device_batch_size=8,
        eval_dataset=blobs(n=8),
        reset_run_history=False,
    )
    lines = out.getvalue().splitlines()
    # The metric lines say epoch 3 and 4 for the second phase: so does the dashboard.
    assert [ln.split(" |")[0] for ln in lines if ln.startswith("epoch ")] == [
        "epoch 1",
        "epoch 2",
        "epoch 3",
        "epoch 4",
    ]
    heads = [" ".join(ln.split()[:3]) for ln in lines if ln.startswith(("train ", "eval "))]
    assert heads == [
        "train epoch 1/2",
        "eval epoch 1/2",
        "train epoch 2/2",
        "eval epoch 2/2",
        "train epoch 3/4",
        "eval epoch 3/4",
        "train epoch 4/4",
        "eval epoch 4/4",
    ], heads
    stages = {s.name: s for s in board.snapshot().stages}
    assert (stages["train"].epoch, stages["train"].epochs) == (3, 4)  # 0-based: epoch 4/4


# ----------------------------------------------------------------------------- a narrow terminal


def _screen(board: Dashboard, width: int) -> list[str]:
    from rich.console import Console

    from scramjet.dashboard import render

    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False).print(render(board.snapshot(), width))
    return out.getvalue().splitlines()


def test_progress_rows_stay_one_line_on_a_narrow_terminal() -> None:
    board = _board(io.StringIO())
    for mile in range(3):
        board.gauge({"loss": 0.5}, mile, 1, 40, "train", samples=16, duration=0.01)
    board.gauge({"acc": 0.9}, 0, 1, 1, "test", samples=64, duration=0.1)
    board.close()
    for width in (56, 60):
        lines = _screen(board, width)
        rows = [ln for ln in lines if ln.startswith(("train ", "test "))]
        # Each row holds its whole text on one line (the bar shrinks or goes), so no
        # "ETA ..." or "done" is left alone on the next line.
        assert len(rows) == 2, lines
        assert rows[0].rstrip().endswith("ETA 0:00:00") and "3/40" in rows[0], rows
        assert rows[1].rstrip().endswith("done") and "1/1" in rows[1], rows
        assert all(len(ln) <= width for ln in lines), lines
        assert not any(ln.strip() in ("done", "ETA 0:00:00") for ln in lines), lines
    wide = [ln for ln in _screen(board, 100) if ln.startswith("train ")]
    assert "█" in wide[0] or "░" in wide[0]  # a bar where there is room for it


# ----------------------------------------------------------------------------- values of every size


def test_the_lowest_y_label_is_the_lowest_value_drawn_when_a_loss_explodes() -> None:
    from scramjet.dashboard import render_curve

    # A loss near 1 that blows up to 1e29: the bottom row holds the values near 1.
    lines = render_curve({"train": [(0.25, 0.9), (0.5, 1.0), (0.75, 1e29)]}, span=4, divisor=5)
    labels = [ln.split("┤")[0].strip() for ln in lines[:5]]
    assert labels[0] == "1e+29" and labels[-1] == "0.9", lines
    assert lines[4].split("┤")[1].startswith("••"), lines  # 0.9 and 1.0 are on that row


def _row_label(lines: list[str], marker: str = "•") -> str:
    """The y label of the row a constant curve is drawn on."""
    rows = [ln for ln in lines if "┤" in ln and marker in ln.split("┤")[1]]
    assert len(rows) == 1, lines
    return rows[0].split("┤")[0].strip()


def test_a_constant_curve_is_drawn_on_the_row_labelled_with_its_value() -> None:
    from scramjet.dashboard import render_curve

    # A constant learning rate, tiny or not, with an even or odd number of rows: the row
    # it is drawn on says its value (it said 1.1e-07 for 1e-09, or a negative number).
    for value, label in ((1e-9, "1e-09"), (1e-30, "1e-30"), (0.01, "0.01"), (0.0, "0")):
        for divisor in (4, 5, 10):
            lines = render_curve({"train": [(0.5, value), (1.0, value)]}, span=4, divisor=divisor)
            assert _row_label(lines) == label, (value, divisor, lines)


def test_a_learning_rate_logged_to_the_board_is_shown_at_its_value() -> None:
    board = _board(io.StringIO())
    for mile in range(6):
        board.gauge({"lr": 3e-8}, mile, 0, 6, "train")
    board.close()
    lines = _screen(board, 80)
    curve = lines[next(i for i, ln in enumerate(lines) if ln.startswith("lr  (")) + 1 :]
    assert _row_label(curve[: board.divisor]) == "3e-08", lines
    assert "lr 3e-08" in "\n".join(lines)


def test_tiny_values_that_vary_are_drawn_as_they_vary() -> None:
    from scramjet.dashboard import render_curve

    lines = render_curve({"train": [(0.3, 1e-13), (0.6, 3e-13), (0.9, 5e-13)]}, span=3, divisor=3)
    assert [ln.split("┤")[0].strip() for ln in lines[:3]] == ["5e-13", "3e-13", "1e-13"], lines
    assert [ln.split("┤")[1] for ln in lines[:3]] == ["  •", " • ", "•  "], lines


# ----------------------------------------------------------------------------- NaN on a narrow terminal


def test_a_narrow_terminal_still_says_that_a_curve_is_nan() -> None:
    import math

    board = _board(io.StringIO())
    for mile in range(6):
        board.gauge({"loss": 0.5 if mile < 3 else math.nan, "gnorm": math.inf}, mile, 0, 6, "train")
    board.close()
    text = " ".join(" ".join(_screen(board, 40)).split())  # as read, whatever the wrapping
    # Under the loss curve and in place of the gnorm curve: the whole note, not its start.
    assert "! 3 of the last 6 points are NaN or infinite (not drawn)" in text, text
    assert "(no finite value to draw: the last 6 points are NaN or infinite)" in text, text


# ----------------------------------------------------------------------------- a run that fails


class _FailAt(TrainerCallback):
    """Raises inside the training loop at ``batch`` of ``epoch`` (0-based)."""

    def __init__(self, epoch: int, batch: int, error: BaseException) -> None:
        self.epoch, self.batch, self.error = epoch, batch, error

    def on_train_step_end(self, trainer: Any, **kwargs: Any) -> None:
        state = trainer.state
        if (state.epoch, state.batches_seen_in_epoch) == (self.epoch, self.batch):
            raise self.error


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_a_failed_run_leaves_a_last_progress_line_saying_where_it_stopped(
    error: BaseException,
) -> None:
    out = io.StringIO()
    bar = ProgressBarCallback(file=out, interval=600)
    trainer = make_trainer(TinyMLP(), callbacks=[_FailAt(1, 3, error), bar])
    with pytest.raises((CallbackError, KeyboardInterrupt)):
        trainer.train(blobs(n=32), num_epochs=3, per_device_batch_size=4)
    lines = out.getvalue().splitlines()
    # A CI log read after the crash shows the batch it died at, not only epoch 1's end.
    assert lines[0].startswith("epoch 1/3 train 8/8"), lines
    assert lines[-1].startswith("epoch 2/3 train 3/8 | loss "), lines
    assert lines[-1].endswith("ended early"), lines
    assert len(lines) == 2, lines


# ----------------------------------------------------------------------------- format names


class _Accuracy(TrainerCallback):
    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.run_history.update_metric("eval_accuracy", 0.875)


@pytest.mark.parametrize("key", ["accuracy", "eval_accuracy"])
def test_format_takes_a_metric_by_its_run_history_name_too(key: str) -> None:
    # format={"eval_accuracy": ...} was silently ignored: only the short name was looked up
    out = io.StringIO()
    board = Dashboard(
        file=out, show_memory=False, print_every=600, format={key: ("percent", ".1f")}
    )
    trainer = make_trainer(TinyMLP(), callbacks=[_Accuracy(), board])
    trainer.train(blobs(n=16), num_epochs=1, per_device_batch_size=8, eval_dataset=blobs(n=8))
    board.close()
    eval_lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("eval ")]
    assert eval_lines and "87.5" in eval_lines[-1], eval_lines
    assert "0.875" not in eval_lines[-1]
