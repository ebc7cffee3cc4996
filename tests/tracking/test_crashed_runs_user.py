"""Runs as a user finds them after a crash, and hyperparameters as a user names them: a run
killed with SIGKILL still tells how far it got and for how long, ``--params`` takes a group
name, and two hyperparameters that would share one flattened name are refused."""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.cli import main
from scramjet.tracking import Experiment, list_runs, read_metrics
from scramjet.tracking.report import build_report, compare_runs

#: A training process that stops before its third epoch and waits there to be killed.
_CHILD = """
import sys, time, torch
from torch.utils.data import TensorDataset
from scramjet import Trainer, TrainerCallback
from scramjet.tracking import Experiment

class WaitForTheKill(TrainerCallback):
    epochs = 0
    def on_train_epoch_start(self, trainer, **kwargs):
        self.epochs += 1
        if self.epochs == 3:
            print("waiting", flush=True)
            time.sleep(60)

gen = torch.Generator().manual_seed(0)
data = TensorDataset(torch.randn(96, 6, generator=gen), torch.randint(0, 3, (96,), generator=gen))
model = torch.nn.Linear(6, 3)
exp = Experiment("proj", "killed", root=sys.argv[1], checkpoint=None, log_every_n_steps=1,
                 hyperparams={"lr": 0.1})
trainer = Trainer(model, torch.nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), 0.1),
                  callbacks=[exp, WaitForTheKill()], seed=0)
trainer.train(data, 3, per_device_batch_size=16)
"""


def _killed_run(root: Path) -> tuple[Path, float]:
    """A run whose training process got SIGKILL after two epochs of 6 steps (its epoch
    rows written); returns the run folder and when the kill was sent."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "waiting"
        (run,) = root.glob("proj/*/")
        deadline = time.monotonic() + 10
        while not any(r["scope"] == "epoch" and r["epoch"] == 2 for r in read_metrics(run)):
            assert time.monotonic() < deadline, "the second epoch's row never reached the files"
            time.sleep(0.05)
        time.sleep(0.6)  # the kill comes well after the last write
        killed_at = time.time()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=10)  # reaped: its pid is gone, as after a real crash
    assert child.returncode == -signal.SIGKILL
    return run, killed_at


def _last_write(run: Path) -> float:
    return max((run / name).stat().st_mtime for name in ("metrics.csv", "run.json"))


def _summary_cell(page: str, row: str) -> str:
    match = re.search(rf"<tr><th>{re.escape(row)}</th><td>(.*?)</td></tr>", page, flags=re.S)
    assert match, f"no {row!r} row in the page"
    return html_lib.unescape(re.sub(r"<[^>]+>", "", match.group(1)))


def _compare_row(page: str, row: str) -> list[str]:
    match = re.search(rf"<tr><td>{re.escape(row)}</td>(.*?)</tr>", page, flags=re.S)
    assert match, f"no {row!r} row in the comparison"
    return [html_lib.unescape(c) for c in re.findall(r"<td>(.*?)</td>", match.group(1))]


def test_a_run_killed_with_sigkill_shows_its_last_step_and_time_to_its_last_write(
    tmp_path: Path,
) -> None:
    run, killed_at = _killed_run(tmp_path / "runs")
    info = json.loads((run / "run.json").read_text())
    assert "ended" not in info and "last_step" not in info, "the killed process said nothing"
    ran = _last_write(run) - info["started"]
    assert 0 < ran < killed_at - info["started"] - 0.4

    (record,) = list_runs(tmp_path / "runs")
    assert record["status"] == "crashed"
    assert record["last_step"] == 12 and record["epochs"] == 2, "read from metrics.csv"
    assert record["duration_s"] == pytest.approx(ran, abs=0.01)
    assert record["duration_note"] == "crashed; to its last write"

    page = build_report(run).read_text(encoding="utf-8")
    assert _summary_cell(page, "status") == "crashed"
    assert _summary_cell(page, "last step") == "12"
    duration = _summary_cell(page, "duration")
    assert re.fullmatch(r"\d+\.\d s \(crashed; to its last write\)", duration), duration
    assert float(duration.split()[0]) == pytest.approx(ran, abs=0.051)
    assert "not finished" not in page

    done = Experiment("proj", "done", root=tmp_path / "runs")
    make_trainer([done]).train(tiny_data(), 1, per_device_batch_size=16)
    cmp = compare_runs([run, done.run_dir], tmp_path / "cmp.html").read_text(encoding="utf-8")
    assert _compare_row(cmp, "last step") == ["12", "6"]
    crashed, finished = _compare_row(cmp, "duration")
    assert crashed.endswith(" s (crashed; to its last write)") and "crashed" not in finished
    assert _compare_row(cmp, "status") == ["crashed", "finished"]


def test_a_finished_run_keeps_its_recorded_duration_and_last_step(tmp_path: Path) -> None:
    exp = Experiment("proj", "done", root=tmp_path / "runs")
    make_trainer([exp]).train(tiny_data(), 2, per_device_batch_size=16)
    info = json.loads((exp.run_dir / "run.json").read_text())
    (record,) = list_runs(tmp_path / "runs")
    assert record["status"] == "finished" and record["last_step"] == info["last_step"] == 12
    assert record["duration_s"] == info["duration"] and record["duration_note"] is None


def _run_with(root: Path, hyperparams: dict[str, Any]) -> Path:
    exp = Experiment("proj", "hp", root=root, hyperparams=hyperparams, checkpoint=None)
    make_trainer([exp]).train(tiny_data(32), 1, per_device_batch_size=16)
    return exp.run_dir


def _table(out: str) -> list[list[str]]:
    lines = [line for line in out.splitlines() if line.strip()]
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    ends = [*starts[1:], None]
    return [[line[a:b].strip() for a, b in zip(starts, ends)] for line in lines]


def test_params_given_a_group_name_shows_every_hyperparameter_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "runs"
    for lr in (0.1, 0.03):
        _run_with(root, {"optim": {"lr": lr, "momentum": 0.9}, "optimizer": "sgd", "batch": 16})
    capsys.readouterr()
    assert main(["runs", str(root), "--params", "optim,batch"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err, captured.err
    header, *rows = _table(captured.out)
    assert header[4:7] == ["optim.lr", "optim.momentum", "batch"], "not `optimizer`"
    assert sorted(row[4] for row in rows) == ["0.03", "0.1"]
    assert [row[5] for row in rows] == ["0.9", "0.9"]

    assert main(["runs", str(root), "--params", "optim,optm"]) == 0
    captured = capsys.readouterr()
    assert "no run has a hyperparameter named 'optm'" in captured.err
    assert "'optim'" not in captured.err.split("known:")[0], "a group is a known name"
    assert "optim.lr" in captured.err.split("known:")[1]


@pytest.mark.parametrize(
    ("hyperparams", "named"),
    [
        ({"a.b": 1, "a": {"b": 2}}, ["['a.b']", "['a']['b']", "'a.b'"]),
        ({"key_1": {"a.b": 1, "a": {"b": 1}}}, ["['key_1']['a.b']", "['key_1']['a']['b']"]),
        ({1: "x", "1": "y"}, ["1", "'1'"]),
    ],
    ids=["dotted-and-nested", "deeper", "int-and-str-key"],
)
def test_hyperparameters_sharing_one_flattened_name_are_refused_before_anything_is_written(
    tmp_path: Path, hyperparams: dict[Any, Any], named: list[str]
) -> None:
    with pytest.raises(ValueError) as raised:
        Experiment("proj", "clash", root=tmp_path / "runs", hyperparams=hyperparams)
    message = str(raised.value)
    for text in named:
        assert text in message, message
    assert "rename" in message.lower()
    assert not (tmp_path / "runs").exists(), "nothing was written"


def test_dotted_names_that_do_not_collide_are_kept(tmp_path: Path) -> None:
    run = _run_with(tmp_path / "runs", {"a.b": 1, "a": {"c": 2}})
    (record,) = list_runs(tmp_path / "runs")
    assert record["hyperparams"] == {"a.b": 1, "a.c": 2}
    assert json.loads((run / "hyperparams.json").read_text())["hyperparams"]["a.b"] == 1
