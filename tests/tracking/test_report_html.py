"""report.html and the compare page as a reader sees them, opened in headless Chromium."""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from tracking_helpers import CHROMIUM, tiny_data, tiny_model

from scramjet import Trainer
from scramjet.cli import main
from scramjet.metrics import ClassificationResults
from scramjet.tracking import Experiment
from scramjet.tracking.report import build_report, compare_runs


def _open(page: Path, tmp: Path, shot: Path) -> tuple[str, str]:
    """Render ``page`` offline; return the DOM after load and Chromium's log."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        raise RuntimeError("chromium is required (scripts/system-deps.sh installs it)")
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        f"--screenshot={shot}",
        "--dump-dom",
        "--window-size=1200,2400",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout, done.stderr


def _console_problems(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if ":CONSOLE" in ln or "net::ERR" in ln]


def _cell(dom: str, row: str) -> str:
    match = re.search(rf"<tr><th>{re.escape(row)}</th><td>(.*?)</td></tr>", dom, flags=re.S)
    assert match, f"no {row!r} row in the report"
    return html_lib.unescape(re.sub(r"<[^>]+>", "", match.group(1)))


def _matrix(dom: str, name: str) -> list[list[int]]:
    table = re.search(rf'<table class="confusion" id="confusion-{name}">(.*?)</table>', dom, re.S)
    assert table, "no confusion matrix table"
    body = table.group(1).split("<tbody>", 1)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    return [[int(c) for c in re.findall(r'<td class="cm"[^>]*>(\d+)</td>', r)] for r in rows]


def _run(root: Path, lr: float, declared_lr: float, seed: int = 0) -> tuple[Experiment, Trainer]:
    model = tiny_model(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    exp = Experiment(
        "proj",
        "mlp",
        root=root,
        hyperparams={"lr": declared_lr, "hidden": 16, "batch_size": 16},
        checkpoint=None,
        save_script=False,
    )
    trainer = Trainer(model, torch.nn.CrossEntropyLoss(), opt, callbacks=[exp], seed=seed)
    trainer.train(tiny_data(), 3, eval_dataset=tiny_data(40, seed=1), per_device_batch_size=16)
    test = tiny_data(60, seed=2)
    logits = trainer.predict(test, per_device_batch_size=20)
    exp.log_results("test", ClassificationResults(num_classes=3)(logits, test.tensors[1]))
    return exp, trainer


def test_report_shows_status_duration_setup_and_confusion_matrix(tmp_path: Path) -> None:
    exp, _ = _run(tmp_path / "runs", lr=0.02, declared_lr=0.01)
    run = exp.run_dir
    assert main(["report", str(run)]) == 0  # rebuilt with the results logged after training
    shot = tmp_path / "report.png"
    dom, log = _open(run / "report.html", tmp_path, shot)
    print(f"report screenshot: {shot}")
    assert _console_problems(log) == [], _console_problems(log)
    assert "http://" not in (run / "report.html").read_text().replace("http://www.w3", "")

    info = json.loads((run / "run.json").read_text())
    assert _cell(dom, "status") == info["status"] == "finished"
    seconds = float(re.search(r'data-seconds="([\d.]+)"', dom).group(1))  # type: ignore[union-attr]
    assert seconds == pytest.approx(info["finished"] - info["started"], abs=1e-3)
    assert re.fullmatch(r"\d+\.\d s|\d+ min \d\d s", _cell(dom, "duration"))
    assert _cell(dom, "host") == info["host"] and _cell(dom, "world size") == "1"
    assert _cell(dom, "CPU") and _cell(dom, "GPU") == "none" and _cell(dom, "device") == "cpu"

    # The declared lr contradicts the optimizer's: one warning line says so.
    warnings = re.findall(r'<p class="warning">(.*?)</p>', dom)
    assert len(warnings) == 1 and "lr = 0.01" in warnings[0] and "lr = 0.02" in warnings[0]
    # The training setup leads with the optimizer and its settings, not its internals.
    setup = dom.split("<h3>Training setup</h3>", 1)[1].split("</table>", 1)[0]
    names = re.findall(r"<tr><td>([^<]+)</td>", setup)
    assert names[:5] == [
        "optimizer",
        "optimizer lr",
        "optimizer betas",
        "optimizer weight_decay",
        "optimizer eps",
    ]
    assert {"epochs", "batch size per device", "gradient accumulation", "precision"} <= set(names)
    assert dom.index("<h3>Declared") < dom.index("<h3>Training setup")
    assert dom.index("<h3>Training setup") < dom.index("Other recorded settings")

    results = json.loads((run / "results" / "test.json").read_text())
    assert _matrix(dom, "test") == results["confusion_matrix"]
    assert sum(map(sum, results["confusion_matrix"])) == 60
    per_class = dom.split("<h3>Per class</h3>", 1)[1].split("</table>", 1)[0]
    supports = [int(s) for s in re.findall(r"<td>(\d+)</td></tr>", per_class)]
    assert supports == [sum(row) for row in results["confusion_matrix"]]

    pixels = np.asarray(__import__("PIL.Image").Image.open(shot).convert("RGB"))
    r, g, b = (pixels[..., i].astype(int) for i in range(3))
    assert ((abs(r - g) > 60) | (abs(g - b) > 60)).sum() > 500, "badges, matrix and plots drawn"


def test_console_problems_are_detected(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>console.error('broken page')</script>")
    _, log = _open(page, tmp_path, tmp_path / "broken.png")
    assert any("broken page" in ln for ln in _console_problems(log))


@pytest.mark.parametrize("epochs", [1, 2, 3, 5])
def test_epoch_plots_have_whole_epoch_ticks(epochs: int) -> None:
    from scramjet.tracking.report import _line_figure

    xs = list(range(1, epochs + 1))
    fig, ax = _line_figure("loss", [("train", xs, [1.0 / x for x in xs])], "epoch")
    fig.canvas.draw()
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_compare_page_lists_results_and_setting_differences(tmp_path: Path) -> None:
    a, _ = _run(tmp_path / "runs", lr=0.02, declared_lr=0.02)
    b, _ = _run(tmp_path / "runs", lr=0.05, declared_lr=0.05, seed=1)
    out = compare_runs([a.run_dir, b.run_dir], tmp_path / "compare.html")
    dom, log = _open(out, tmp_path, tmp_path / "compare.png")
    assert _console_problems(log) == []
    results = [json.loads((e.run_dir / "results" / "test.json").read_text()) for e in (a, b)]
    row = re.search(r"<tr><td>test\.accuracy</td><td>([^<]+)</td><td>([^<]+)</td></tr>", dom)
    assert row, "the results of both runs"
    assert [float(v) for v in row.groups()] == pytest.approx([r["accuracy"] for r in results])
    for exp, result in zip((a, b), results):
        assert _matrix(dom, f"test-{exp.run_dir.name}") == result["confusion_matrix"]
    diff = dom.split("Hyperparameters that differ", 1)[1].split("</table>", 1)[0]
    assert "hyperparams.lr" in diff and "optimizer lr" in diff and "hidden" not in diff
    assert "finished" in dom.split("<h2>Runs</h2>", 1)[1].split("</table>", 1)[0]
    assert build_report(a.run_dir).is_file()


def test_report_written_by_the_run_shows_its_end_and_scheduler(tmp_path: Path) -> None:
    """The report the run writes itself (no rebuild) reads the final run.json."""
    model = tiny_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    exp = Experiment("proj", "sched", root=tmp_path, checkpoint=None, save_script=False)
    trainer = Trainer(model, torch.nn.CrossEntropyLoss(), opt, callbacks=[exp])
    trainer.train(
        tiny_data(),
        2,
        per_device_batch_size=16,
        create_scheduler_fn=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    )
    info = json.loads((exp.run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["duration"] > 0
    page = (exp.run_dir / "report.html").read_text()
    assert "not finished" not in page
    assert _cell(page, "status") == "finished"
    hyper = json.loads((exp.run_dir / "hyperparams.json").read_text())
    assert hyper["scheduler"]["class"] == "StepLR" and hyper["scheduler"]["step_size"] == 3
    assert "StepLR" in page
    env = json.loads((exp.run_dir / "environment.json").read_text())
    assert env["cpu_model"] and env["cpu_model"] in page


def test_long_hyperparameter_values_wrap_inside_the_page(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "proj" / "long_20250101-000000_abcdef"
    run.mkdir(parents=True)
    declared = {
        "class_names": [f"class_{i:03d}" for i in range(120)],  # one long list value
        "data": "/mnt/" + "x" * 400,  # one long word
        "lr": 0.1,
    }
    (run / "hyperparams.json").write_text(json.dumps({"hyperparams": declared}))
    (run / "run.json").write_text(json.dumps({"status": "finished", "started": 1.0}))
    page = build_report(run)
    # Measured by the browser: a copy of the page that writes its own widths into the DOM.
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.read_text().replace(
            "</body>",
            "<script>document.body.insertAdjacentHTML('beforeend', '<p id=\"w\">' + "
            "document.documentElement.scrollWidth + ' ' + "
            "document.documentElement.clientWidth + '</p>')</script></body>",
        )
    )
    dom, _ = _open(probe, tmp_path, tmp_path / "long.png")
    scroll, client = map(int, re.search(r'<p id="w">(\d+) (\d+)</p>', dom).groups())  # type: ignore[union-attr]
    assert scroll <= client, f"the page is {scroll} px wide in a {client} px window"
    assert "class_119" in html_lib.unescape(dom), "the value is shown whole"
