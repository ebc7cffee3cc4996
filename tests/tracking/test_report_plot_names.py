"""The report's plots draw metric and run names as written: a ``$`` in a name crashed
the end of training (matplotlib parsed it as math text and raised), and a name starting
with ``_`` was left out of a comparison's legend (matplotlib hides such labels)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks.base import TrainerCallback
from scramjet.tracking import Experiment
from scramjet.tracking.report import _line_figure, compare_runs

NAMES = ("cost $x^{2$", "$\\foo$", "_aux")


class _LogsOddNames(TrainerCallback):
    def on_evaluation_run_end(self, trainer: Any, **kwargs: Any) -> None:
        for i, name in enumerate(NAMES):
            trainer.log(name, torch.tensor(0.5 + i))


def test_metric_names_with_dollars_are_plotted(tmp_path: Path) -> None:
    exp = Experiment("p", "_baseline", root=tmp_path, checkpoint=None, save_script=False)
    trainer = make_trainer([_LogsOddNames(), exp])
    trainer.train(tiny_data(16), 1, eval_dataset=tiny_data(16, seed=1), per_device_batch_size=16)
    report = (exp.run_dir / "report.html").read_text(encoding="utf-8")
    assert "cost $x^{2$" in report and report.count("data:image/png") >= 4
    other = shutil.copytree(exp.run_dir, tmp_path / "p" / "copy")
    page = compare_runs([exp.run_dir, other], tmp_path / "compare.html")
    text = page.read_text(encoding="utf-8")
    assert "$\\foo$" in text and text.count("data:image/png") >= 4


def test_every_name_is_in_the_legend() -> None:
    lines = [(n, [1, 2], [1.0, 0.5]) for n in ("_baseline", "lr=0.2", "cost $x^{2$")]
    _, ax = _line_figure("$\\foo$", lines, "epoch")
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["_baseline", "lr=0.2", "cost $x^{2$"], texts
    assert ax.get_title() == "$\\foo$"
