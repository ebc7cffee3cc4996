"""``scramjet report -o`` never replaces a file a run folder holds: a mistyped path such as
``-o RUN/metrics.csv`` used to overwrite the run's metrics with the comparison page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scramjet.cli import main


def _run_folder(root: Path, name: str, lr: float) -> Path:
    run = root / "proj ü" / name
    run.mkdir(parents=True)
    (run / "hyperparams.json").write_text(json.dumps({"hyperparams": {"lr": lr}}))
    (run / "run.json").write_text(json.dumps({"status": "finished"}))
    (run / "metrics.csv").write_text("scope,epoch,step,time,name,value\nepoch,1,4,0.0,loss,0.5\n")
    return run


@pytest.mark.parametrize("target", ["metrics.csv", "run.json", "report.html"])
def test_report_output_naming_a_file_of_a_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    a, b = _run_folder(tmp_path, "a", 0.1), _run_folder(tmp_path, "b", 0.01)
    (a / "report.html").write_text("<html>the run's own page</html>")
    kept = (a / target).read_bytes()
    assert main(["report", str(a), str(b), "-o", str(a / target)]) == 2
    assert (a / target).read_bytes() == kept  # the run's file is untouched
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and target in err and "run folder" in err


def test_report_output_as_a_new_page_in_a_run_folder_is_written(tmp_path: Path) -> None:
    a, b = _run_folder(tmp_path, "a", 0.1), _run_folder(tmp_path, "b", 0.01)
    assert main(["report", str(a), str(b), "-o", str(a / "vs_b.html")]) == 0
    assert (a / "vs_b.html").read_text().startswith("<!DOCTYPE html>")
    assert (a / "metrics.csv").read_text().startswith("scope,")


def test_report_output_in_a_run_folder_can_be_written_again(tmp_path: Path) -> None:
    # The same command twice: the comparison page it wrote into the run folder is its
    # own, and replaced (it was refused as "a file of the run folder" the second time).
    a, b = _run_folder(tmp_path, "a", 0.1), _run_folder(tmp_path, "b", 0.01)
    page = a / "compare.html"
    for _ in range(2):
        assert main(["report", str(a), str(b), "-o", str(page)]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    # a run's own page is still refused: it is not a comparison page
    kept = (a / "report.html").read_bytes()
    assert main(["report", str(a), str(b), "-o", str(a / "report.html")]) == 2
    assert (a / "report.html").read_bytes() == kept
