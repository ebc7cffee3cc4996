"""``scramjet runs --metrics``: names that hold a comma, and the option given more than once."""

from __future__ import annotations

from pathlib import Path

import pytest

from scramjet.cli import main
from scramjet.tracking import Experiment


def _run_with_results(root: Path) -> Path:
    exp = Experiment("proj", "commas", root=root, checkpoint=None)
    exp.start()
    exp.log_results("test", {"f1[a,b]": 0.625, "accuracy": 0.875, "loss": 0.25})
    exp.finish()
    return exp.run_dir


def _cells(out: str, run: Path) -> list[str]:
    line = next(row for row in out.splitlines() if run.name in row)
    return line.split()


def test_a_quoted_metric_name_keeps_its_comma(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_with_results(tmp_path)
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--metrics", 'accuracy,"f1[a,b]"']) == 0
    captured = capsys.readouterr()
    header = captured.out.splitlines()[0].split()
    assert header[-2:] == ["accuracy", "f1[a,b]"]
    assert _cells(captured.out, run)[-2:] == ["0.875", "0.625"]
    assert "no run has a metric" not in captured.err


def test_metrics_given_twice_shows_both_and_keeps_each_name_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_with_results(tmp_path)
    capsys.readouterr()
    args = ["runs", str(tmp_path), "--metrics", "accuracy,loss", "--metrics", '"f1[a,b]"']
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].split()[-3:] == ["accuracy", "loss", "f1[a,b]"]
    assert _cells(captured.out, run)[-3:] == ["0.875", "0.25", "0.625"]


def test_an_unquoted_comma_name_is_named_with_the_quoting_that_selects_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_with_results(tmp_path)
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--metrics", "f1[a,b]"]) == 0
    err = capsys.readouterr().err
    assert "no run has a metric named 'f1[a', 'b]'" in err
    assert "--metrics '\"f1[a,b]\"'" in err
