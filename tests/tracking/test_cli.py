from __future__ import annotations

from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.cli import main
from scramjet.tracking import Experiment


def _run(root: Path, lr: float) -> Path:
    exp = Experiment("proj", "cmp", root=root, hyperparams={"lr": lr, "same": 1}, checkpoint=None)
    make_trainer([exp]).train(
        tiny_data(), 2, eval_dataset=tiny_data(30, 1), per_device_batch_size=16
    )
    return exp.run_dir


def test_runs_lists_runs_with_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path, 0.1), _run(tmp_path, 0.3)
    assert main(["runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert a.name in out and b.name in out and "eval_loss_epoch" in out and "finished" in out
    assert main(["runs", str(tmp_path / "nothing")]) == 1


def test_report_rebuilds_and_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path, 0.1), _run(tmp_path, 0.3)
    (a / "report.html").unlink()
    out_file = tmp_path / "cmp.html"
    assert main(["report", str(a), str(b), "-o", str(out_file)]) == 0
    assert (a / "report.html").is_file()
    page = out_file.read_text()
    assert "Hyperparameters that differ" in page and "hyperparams.lr" in page
    assert "hyperparams.same" not in page, "only differing hyperparameters are listed"
    assert page.count("data:image/png;base64,") >= 3  # loss curves overlaid per metric
    assert main(["report", str(tmp_path / "missing")]) == 1
