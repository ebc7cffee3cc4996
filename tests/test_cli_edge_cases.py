"""The ``scramjet`` command line as a user drives it: exit codes, one-line errors, Ctrl-C,
pipes, unicode names and the options' documented effects."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from scramjet.cli import main
from scramjet.tracking import Experiment
from scramjet.trainer import Trainer

CLI = [sys.executable, "-m", "scramjet.cli"]


def _tracked_run(
    root: Path, project: str = "proj", name: str = "run", hyperparams: dict | None = None
) -> Path:
    """A real, finished two-epoch run of a tiny linear model (a fraction of a second)."""
    torch.manual_seed(0)
    x = torch.randn(32, 4)
    data = list(zip(x, (x.sum(dim=1) > 0).long()))
    model = torch.nn.Linear(4, 2)
    exp = Experiment(project, name, root=root, hyperparams=hyperparams or {}, checkpoint=None)
    trainer = Trainer(
        model,
        torch.nn.CrossEntropyLoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        callbacks=[exp],
        seed=0,
    )
    trainer.train(data, num_epochs=2, eval_dataset=data, per_device_batch_size=16)
    return exp.run_dir


def _sigint_after(command: list[str], marker: str, cwd: Path, timeout: float = 60) -> tuple:
    """Start ``command`` as Ctrl-C would find it (default SIGINT handler, own process
    group), send SIGINT to its group once ``marker`` appears on stdout; (rc, out, err)."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), os.setpgrp()),
    )
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    assert marker in seen, seen
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, seen + out, err


# --- Ctrl-C and pipes -------------------------------------------------------------------


def test_ctrl_c_during_demo_exits_130_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    rc, _, err = _sigint_after(
        [*CLI, "demo", "--epochs", "1", "--samples", "20000", "--out", "d", "--no-dashboard"],
        "[1/5]",
        tmp_path,
    )
    assert rc == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("scramjet demo: interrupted"), err


def test_runs_piped_into_a_reader_that_stops_early_ends_without_a_traceback(
    tmp_path: Path,
) -> None:
    run = _tracked_run(tmp_path)
    project = run.parent
    for i in range(300):  # a long listing: more than a pipe buffer
        twin = project / f"copy_{i:03d}"
        twin.mkdir()
        for name in ("run.json", "hyperparams.json", "metrics.jsonl"):
            (twin / name).write_bytes((run / name).read_bytes())
    proc = subprocess.Popen(
        [*CLI, "runs", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # `scramjet runs | head -1`
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


# --- scramjet demo ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [("--epochs", "0"), ("--samples", "10"), ("--seed", "-1")],
)
def test_demo_rejects_a_bad_number_as_a_usage_error_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", option, value, "--out", str(tmp_path / "d")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"scramjet demo: error: argument {option}" in err and repr(value) in err, err
    assert not (tmp_path / "d").exists(), "nothing is generated for a bad option"


def test_demo_with_out_naming_a_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("not a folder")
    assert main(["demo", "--epochs", "1", "--samples", "64", "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scramjet demo: error:") and str(blocker) in err, err
    assert "--out" in err and len(err.strip().splitlines()) == 1, err


def test_demo_without_dashboard_does_not_announce_the_dashboard(tmp_path: Path) -> None:
    from scramjet.demo.run import training_banner

    assert "Dashboard" in training_banner(dashboard=True)
    assert "Dashboard" not in training_banner(dashboard=False)


# --- scramjet report --------------------------------------------------------------------


def test_report_of_a_project_glob_still_works_after_the_first_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _tracked_run(tmp_path, name="a"), _tracked_run(tmp_path, name="b")
    assert main(["report", str(a), str(b)]) == 0
    assert (a.parent / "compare.html").is_file()  # the default: next to the first run
    # `scramjet report runs/proj/*` now also matches the page written by the last call
    globbed = sorted(str(p) for p in a.parent.iterdir())
    capsys.readouterr()
    assert main(["report", *globbed]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert "comparison:" in captured.out
    assert "compare.html" in captured.err and "skipped" in captured.err, captured.err


def test_report_compares_a_run_named_twice_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _tracked_run(tmp_path, name="a"), _tracked_run(tmp_path, name="b")
    assert main(["report", str(a), str(b), str(a / "." / "")]) == 0
    page = (a.parent / "compare.html").read_text()
    assert page.count(f">{a.name}<") == page.count(f">{b.name}<") > 0  # one column each


def test_report_output_option_with_one_run_is_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _tracked_run(tmp_path)
    out = tmp_path / "single.html"
    assert main(["report", str(run), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "scramjet report: error:" in err and "-o" in err and "two or more" in err, err


def test_report_output_option_naming_a_folder_writes_compare_html_inside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _tracked_run(tmp_path, name="a"), _tracked_run(tmp_path, name="b")
    folder = tmp_path / "pages"
    folder.mkdir()
    assert main(["report", str(a), str(b), "-o", str(folder)]) == 0
    assert (folder / "compare.html").is_file()
    assert f"comparison: {folder / 'compare.html'}" in capsys.readouterr().out


def test_report_output_that_cannot_be_written_is_a_one_line_error_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _tracked_run(tmp_path, name="a"), _tracked_run(tmp_path, name="b")
    (a / "report.html").unlink()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["report", str(a), str(b), "-o", str(blocker / "cmp.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scramjet report: error:") and "-o" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (a / "report.html").exists(), "nothing is rebuilt when the output is unusable"


def test_report_given_a_url_says_it_reads_local_folders(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["report", "s3://bucket/experiments/proj/run_1"]) == 2
    err = capsys.readouterr().err
    assert "s3://bucket/experiments/proj/run_1" in err and "local" in err, err
    assert len(err.strip().splitlines()) == 1, err


# --- scramjet runs ----------------------------------------------------------------------


def test_runs_table_stays_aligned_with_wide_unicode_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.cells import cell_len

    _tracked_run(tmp_path, "βeta-проект", "модель_🚀", {"lr": 0.2, "名前": "値"})
    _tracked_run(tmp_path, "alpha", "mlp", {"lr": 0.1})
    capsys.readouterr()
    assert main(["runs", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()

    def starts(line: str) -> list[int]:  # the display column where each cell begins
        return [cell_len(line[: m.start()]) for m in re.finditer(r"\S+(?: \S+)*", line)]

    assert len(lines) == 3
    assert starts(lines[1]) == starts(lines[0]) == starts(lines[2]), "\n".join(lines)


def test_runs_given_a_url_says_it_reads_local_folders(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["runs", "s3://bucket/experiments"]) == 1
    err = capsys.readouterr().err
    assert "s3://bucket/experiments" in err, err  # the URL as given, not 's3:/bucket'
    assert "local" in err and len(err.strip().splitlines()) == 1, err


def test_runs_with_an_unknown_project_names_the_projects_that_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tracked_run(tmp_path, project="mnist")
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--project", "mnsit"]) == 1
    err = capsys.readouterr().err
    assert "'mnsit'" in err and "mnist" in err, err


def test_runs_default_columns_do_not_warn_about_a_metric_nobody_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _tracked_run(tmp_path)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:  # a run trained without an eval set
        row["metrics"].pop("eval_loss_epoch", None)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["runs", str(tmp_path)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["runs", str(tmp_path), "--metrics", "eval_loss_epoch"]) == 0
    assert "no run has a metric named 'eval_loss_epoch'" in capsys.readouterr().err


# --- defects outside the CLI modules (recorded; see the reasons) -------------------------


@pytest.mark.slow
def test_launch_names_the_exit_status_of_a_script_that_exits_non_zero(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys\nsys.exit(3)\n")
    proc = subprocess.run(
        [*CLI, "launch", str(script)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("scramjet launch:"))
    assert "rank 0 failed" in line and "called sys.exit(3)" in line, proc.stderr[-2000:]


@pytest.mark.slow
def test_ctrl_c_during_launch_exits_130_without_promising_a_checkpoint(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    rc, _, err = _sigint_after([*CLI, "launch", str(script)], "ready", tmp_path)
    assert rc == 130, err[-2000:]
    assert "saves at its next step" not in err, err[-2000:]


def test_report_of_a_run_whose_process_died_says_crashed_like_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    run = _tracked_run(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    info = json.loads((run / "run.json").read_text())
    info.update(status="running", pid=dead.pid, host=socket.gethostname())
    (run / "run.json").write_text(json.dumps(info))
    assert main(["runs", str(tmp_path)]) == 0
    assert "crashed" in capsys.readouterr().out
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    statuses = re.findall(r'class="status[^"]*"[^>]*>([^<]*)<', page)
    assert statuses == ["crashed"], statuses


def test_documented_runs_metrics_example_names_metrics_result_packages_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scramjet.metrics import ClassificationResults

    docs = (Path(__file__).resolve().parent.parent / "docs" / "tracking.md").read_text()
    names = re.search(r"scramjet runs --metrics ([\w/,]+)", docs)
    assert names is not None
    run = _tracked_run(tmp_path)
    results = ClassificationResults(num_classes=2).compute(
        torch.tensor([[2.0, 0.0], [0.0, 2.0]]), torch.tensor([0, 1])
    )
    (run / "results").mkdir(exist_ok=True)
    (run / "results" / "val.json").write_text(json.dumps(results, default=str))
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--metrics", names.group(1)]) == 0
    assert "no run has a metric" not in capsys.readouterr().err
