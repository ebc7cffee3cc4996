"""The report's plots of metrics and runs named in any script: drawn with an installed font
that has the glyphs (as the dashboard's plots), else with ``?`` in their place and one
warning naming the plot, never matplotlib's "Glyph ... missing from font(s)" per glyph."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
from tracking_helpers import make_trainer, tiny_data

from scramjet.callbacks.base import TrainerCallback
from scramjet.tracking import Experiment
from scramjet.tracking.report import _line_figure, build_report, compare_runs


class _LogsCjkNames(TrainerCallback):
    def on_evaluation_run_end(self, trainer: Any, **kwargs: Any) -> None:
        trainer.log("損失", torch.tensor(0.5))
        trainer.log("acc🚀", torch.tensor(0.25))


def test_cjk_and_emoji_names_give_one_warning_per_page(tmp_path: Path) -> None:
    exp = Experiment("p", "验证", root=tmp_path, checkpoint=None, save_script=False)
    trainer = make_trainer([_LogsCjkNames(), exp])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train(
            tiny_data(16), 1, eval_dataset=tiny_data(16, seed=1), per_device_batch_size=16
        )
    other = shutil.copytree(exp.run_dir, tmp_path / "p" / "副本")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_report(exp.run_dir)
        compare_runs([exp.run_dir, other], tmp_path / "compare.html")
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "missing from font" in m], messages
    assert len(messages) == 2, messages  # one for the report, one for the comparison
    report, comparison = messages
    assert "the report of" in report and all(c in report for c in "損失🚀"), report
    assert all(c in comparison for c in "損失🚀验证副本"), comparison


def test_a_glyph_another_installed_font_has_is_drawn_with_it() -> None:
    # "ℊ" (script g) is not in DejaVu Sans; STIX, shipped with matplotlib, has it.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig, ax = _line_figure("loss ℊ", [("a ℊ", [1], [1.0]), ("b", [1], [2.0])], "epoch")
        fig.canvas.draw()
    assert [str(w.message) for w in caught] == []
    assert ax.get_title() == "loss ℊ"
    assert len(ax.title.get_fontfamily()) > 1, ax.title.get_fontfamily()
