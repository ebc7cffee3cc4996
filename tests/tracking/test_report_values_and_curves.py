"""What a report and a comparison page show: every digit of a float (two runs whose
settings differ read differently; 0.9999995 is not shown as 1), a confusion matrix with
NaN cells (a row-normalised matrix, a class with no sample) instead of a crash, each run in
one colour and line across every comparison plot with a legend, and a plot whose values
are all nan or inf saying so on whole-number epochs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.colors as mc
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks import TrainerCallback
from scramjet.tracking import Experiment
from scramjet.tracking._report_parts import run_labels
from scramjet.tracking.report import _line_figure, build_report, compare_runs


def _run(root: Path, name: str, hyper: dict[str, Any], callbacks: Any = ()) -> Path:
    exp = Experiment("proj", name, root=root, hyperparams=hyper, checkpoint=None)
    make_trainer([exp, *callbacks]).train(tiny_data(32), 2, eval_dataset=tiny_data(16, 1),
                                          per_device_batch_size=16)  # fmt: skip
    return exp.run_dir


def test_settings_that_differ_read_differently(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {"lr": 0.0001, "beta": 0.9999995})
    b = _run(tmp_path, "b", {"lr": 0.00010000001, "beta": 0.9999996})
    page = compare_runs([a, b], tmp_path / "cmp.html").read_text()
    differ = page[page.index("Hyperparameters that differ") : page.index("Final epoch")]
    assert "<td>hyperparams.beta</td><td>0.9999995</td><td>0.9999996</td>" in differ
    assert "<td>hyperparams.lr</td><td>0.0001</td><td>0.00010000001</td>" in differ
    assert "<td>beta</td><td>0.9999995</td>" in (a / "report.html").read_text()


def test_a_confusion_matrix_with_nan_cells_is_shown(tmp_path: Path) -> None:
    exp = Experiment("proj", "cm", root=tmp_path, checkpoint=None)
    make_trainer([exp]).train(tiny_data(16), 1, per_device_batch_size=16)
    exp.log_results("norm", {"confusion_matrix": [[0.5, 0.5], [float("nan"), float("inf")]]})
    page = build_report(exp.run_dir).read_text()
    assert "Results: norm" in page and ">nan</td>" in page and ">inf</td>" in page
    both = compare_runs([exp.run_dir, exp.run_dir], tmp_path / "cmp.html").read_text()
    assert "Confusion matrices: norm" in both and ">nan</td>" in both


def _colour(line: Any) -> str:
    return str(mc.to_hex(line.get_color()))


def test_a_run_keeps_its_colour_and_line_in_every_comparison_plot() -> None:
    _, both = _line_figure("loss", [("a", [1, 2], [1.0, 0.5]), ("b", [1, 2], [1.1, 0.6])],
                           "epoch", runs=[0, 1])  # fmt: skip
    _, only_b = _line_figure("only_b", [("b", [1, 2], [0.7, 0.7])], "epoch", runs=[1])
    assert _colour(only_b.get_lines()[0]) == _colour(both.get_lines()[1])
    assert only_b.get_legend() is not None  # which run it is, with one line too
    lines = [(f"run{i}", [1, 2], [float(i), i + 1.0]) for i in range(11)]
    _, many = _line_figure("m", lines, "epoch", runs=list(range(11)))
    first, eleventh = many.get_lines()[0], many.get_lines()[10]
    assert _colour(first) == _colour(eleventh)  # ten colours, then other lines and markers
    assert first.get_linestyle() != eleventh.get_linestyle()
    assert first.get_marker() != eleventh.get_marker()


class _Inf(TrainerCallback):
    def on_eval_epoch_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("perplexity", math.inf)


def test_a_curve_without_a_finite_value_says_so_on_whole_epochs(tmp_path: Path) -> None:
    _run(tmp_path, "inf", {}, [_Inf()])
    fig, ax = _line_figure("perplexity", [("perplexity", [1, 2], [math.inf] * 2)], "epoch")
    fig.canvas.draw()
    assert ax.get_xlim() == (0.5, 2.5)
    ticks = [t for t in ax.get_xticks() if 0.5 <= t <= 2.5]
    assert ticks == [1.0, 2.0]
    assert any("no finite value" in t.get_text() for t in ax.texts)


def test_only_runs_that_share_a_folder_name_get_longer_labels(tmp_path: Path) -> None:
    a, b = tmp_path / "r1" / "proj" / "a_1", tmp_path / "r1" / "proj" / "b_1"
    copy = tmp_path / "elsewhere" / "proj" / "a_1"
    assert run_labels([a, b, copy]) == ["r1/proj/a_1", "b_1", "elsewhere/proj/a_1"]
    assert run_labels([a, a]) == ["a_1 #1", "a_1 #2"]
