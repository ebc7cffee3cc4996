from __future__ import annotations

import re
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
    assert main(["report", str(tmp_path / "missing")]) == 2


def test_report_refuses_a_folder_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    assert main(["report", str(folder)]) == 2
    captured = capsys.readouterr()
    assert "not a run folder" in captured.err and str(folder) in captured.err
    assert captured.out == ""
    assert list(folder.iterdir()) == [], "nothing is written into a folder that is not a run"


def test_runs_metrics_read_results_and_name_unknown_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, 0.1)
    exp = Experiment("proj", "res", root=tmp_path, checkpoint=None)
    exp.start()
    exp.log_results("test", {"accuracy": 0.875, "confusion": [[1, 0], [0, 1]]})
    exp.log_results("val", {"accuracy": 0.5, "f1": 0.25})
    exp.finish()
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--metrics", "accuracy,val/accuracy,f1,acurracy"]) == 0
    captured = capsys.readouterr()
    line = next(row for row in captured.out.splitlines() if exp.run_dir.name in row)
    assert line.split()[-4:] == ["0.875", "0.5", "0.25", "-"]  # test first, then val
    other = next(row for row in captured.out.splitlines() if run.name in row)
    assert other.split()[-4:] == ["-", "-", "-", "-"]
    assert "no run has a metric named 'acurracy'" in captured.err
    assert "accuracy" in captured.err.split("known:")[1]
    assert "'accuracy'" not in captured.err.split("known:")[0]


def test_runs_shows_a_run_whose_process_vanished_as_crashed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import os
    import subprocess
    import sys

    script = (
        "import os, sys, torch\n"
        "from torch.utils.data import TensorDataset\n"
        "from scramjet import Trainer, TrainerCallback\n"
        "from scramjet.tracking import Experiment\n"
        "class Vanish(TrainerCallback):\n"
        "    def on_train_epoch_end(self, trainer, **kwargs):\n"
        "        os._exit(0)  # no finish(): as if the process were killed\n"
        "exp = Experiment('proj', 'gone', root=sys.argv[1], checkpoint=None)\n"
        "model = torch.nn.Linear(2, 1)\n"
        "trainer = Trainer(model, torch.nn.MSELoss(), torch.optim.SGD(model.parameters(), 0.1),\n"
        "                  callbacks=[exp, Vanish()])\n"
        "trainer.train(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), 2,\n"
        "              per_device_batch_size=4)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    (run_json,) = tmp_path.glob("proj/*/run.json")
    assert json.loads(run_json.read_text())["status"] == "running"
    assert main(["runs", str(tmp_path)]) == 0
    assert "crashed" in capsys.readouterr().out
    info = json.loads(run_json.read_text())
    info["pid"] = os.getpid()  # the same record, pointing at a process that is alive
    run_json.write_text(json.dumps(info))
    assert main(["runs", str(tmp_path)]) == 0
    assert "running" in capsys.readouterr().out


def _table(out: str) -> list[list[str]]:
    """The printed table's cells, cut where the header's columns start."""
    lines = [line for line in out.splitlines() if line.strip()]
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    ends = [*starts[1:], None]
    return [[line[a:b].strip() for a, b in zip(starts, ends)] for line in lines]


def test_runs_shows_the_hyperparameters_that_tell_runs_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {lr: _run(tmp_path, lr) for lr in (0.1, 0.03)}
    capsys.readouterr()
    assert main(["runs", str(tmp_path)]) == 0
    header, *rows = _table(capsys.readouterr().out)
    assert "lr" in header and "same" not in header, "only what differs, by default"
    column = header.index("lr")
    assert {row[0].split("/")[1]: row[column] for row in rows} == {
        run.name: str(lr) for lr, run in runs.items()
    }
    assert main(["runs", str(tmp_path), "--params", "same,lr,widht"]) == 0
    captured = capsys.readouterr()
    header = _table(captured.out)[0]
    assert header[4:7] == ["same", "lr", "widht"]
    assert "no run has a hyperparameter named 'widht'; known: lr, same" in captured.err
    assert main(["runs", str(tmp_path), "--params", ""]) == 0
    assert "lr" not in _table(capsys.readouterr().out)[0]


def test_runs_lists_a_project_folder_or_one_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _run(tmp_path, 0.1), _run(tmp_path, 0.3)
    capsys.readouterr()
    for where, expected in ((tmp_path / "proj", {a, b}), (a, {a})):
        assert main(["runs", str(where)]) == 0
        out = capsys.readouterr().out
        assert "No runs" not in out
        listed = {row[0] for row in _table(out)[1:]}
        assert listed == {f"proj/{run.name}" for run in expected}, where


def test_list_runs_gives_each_run_as_values_to_compare(tmp_path: Path) -> None:
    from scramjet.tracking import list_runs

    a = _run(tmp_path, 0.1)
    exp = Experiment("proj", "cmp", root=tmp_path, hyperparams={"lr": 0.3}, checkpoint=None)
    make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=16)
    exp.log_results("test", {"accuracy": 0.875, "confusion": [[1, 0], [0, 1]]})
    damaged = _run(tmp_path, 0.2)
    (damaged / "run.json").write_text("{not json")
    rows = list_runs(tmp_path)
    assert [r["run_dir"] for r in rows] == [damaged, a, exp.run_dir]  # no start time first
    first = rows[1]
    assert first["status"] == "finished" and first["epochs"] == 2 and first["last_step"] == 12
    assert first["hyperparams"] == {"lr": 0.1, "same": 1} and first["project"] == "proj"
    assert set(first["metrics"]) == {"train_loss_epoch", "eval_loss_epoch", "train_loss", "lr"}
    assert first["started"] is not None and first["duration_s"] > 0
    assert rows[2]["epochs"] == 1 and rows[2]["metrics"]["test/accuracy"] == 0.875
    assert "test/confusion" not in rows[2]["metrics"]  # only numbers
    assert rows[0]["status"] == "unreadable (run.json is not a JSON object)"
    assert rows[0]["hyperparams"]["lr"] == 0.2
    assert list_runs(tmp_path, project="other") == []
    assert [r["run_dir"] for r in list_runs(a)] == [a]
    with pytest.raises(FileNotFoundError, match=r"no runs folder at .*Experiment\(root=...\)"):
        list_runs(tmp_path / "nothing")
