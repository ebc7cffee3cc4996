"""report.html from hand-written run folders: other statuses, missing and damaged files."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from scramjet.tracking.report import build_report


def _folder(tmp_path: Path, **files: Any) -> Path:
    run = tmp_path / "proj" / "run_1"
    (run / "results").mkdir(parents=True)
    for name, data in files.items():
        path = run / (name.replace("__", "/") + ".json")
        path.write_text(data if isinstance(data, str) else json.dumps(data))
    return run


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


HYPER = {
    "project": "proj",
    "hyperparams": {"betas": [0.9, 0.99], "batch_size": 64, "optim": {"lr": 3e-4}},
    "optimizer": {"class": "AdamW", "lr": 3e-4, "betas": [0.9, 0.999], "foreach": None},
    "scheduler": {"class": "CosineAnnealingLR", "T_max": 10},
    "runtime": {"compiled": False},
    "trainer": {
        "num_epochs": 4,
        "train_per_device_batch_size": 16,
        "gradient_accumulation_steps": 2,
        "num_processes": 2,
        "precision": "bf16",
    },
}


def test_a_run_with_every_key_it_may_record(tmp_path: Path) -> None:
    run = _folder(
        tmp_path,
        run={"status": "interrupted", "started": 1_700_000_000.0, "host": "node-7"},
        environment={"cpu_model": "Test CPU 9000", "cuda_devices": ["NVIDIA H200"] * 2},
        hyperparams=HYPER,
        results__val={
            "accuracy": 0.5,
            "confusion_matrix": [[3, 1], [2, 4]],
            "class_names": ["cat", "dog"],
        },
        results__val_predictions=[[0.1, 0.9]],
    )
    page = build_report(run).read_text()
    text = _text(page)
    assert 'class="status warn" id="run-status">interrupted<' in page
    assert "not finished" in text and "node-7" in text
    assert "Test CPU 9000" in text and "2 × NVIDIA H200" in text
    assert "CosineAnnealingLR(T_max=10)" in text and "bf16" in text
    # 16 per device x 2 processes x 2 accumulation = 64: the declared batch size agrees.
    assert re.search(r"effective batch size\s+64", text)
    warnings = re.findall(r'<p class="warning">(.*?)</p>', page)
    assert len(warnings) == 1 and "betas" in warnings[0] and "0.999" in warnings[0], warnings
    other = page.split("Other recorded settings", 1)[1].split("</details>", 1)[0]
    assert "optimizer.foreach" in other and "runtime.compiled" in other
    assert "optimizer.lr" not in other and "hyperparams." not in other
    assert "Results: val" in page and "Results: val_predictions" not in page
    cells = re.findall(r'<td class="cm"[^>]*>(\d+)</td>', page)
    assert cells == ["3", "1", "2", "4"] and "<th>cat</th>" in page and "<th>dog</th>" in page
    # per class: cat precision 3/5, recall 3/4; dog precision 4/5, recall 4/6
    per_class = page.split("<h3>Per class</h3>", 1)[1].split("</table>", 1)[0]
    assert "<td>cat</td><td>0.6</td><td>0.75</td>" in per_class
    assert "<td>dog</td><td>0.8</td><td>0.6666666666666666</td>" in per_class


def test_a_contradicting_learning_rate_and_batch_size_are_flagged(tmp_path: Path) -> None:
    hyper = json.loads(json.dumps(HYPER))
    hyper["hyperparams"] = {"optim": {"lr": 1e-3}, "batch_size": 100}
    run = _folder(tmp_path, hyperparams=hyper, run={"status": "finished"})
    warnings = re.findall(r'<p class="warning">(.*?)</p>', build_report(run).read_text())
    text = html.unescape(" ".join(warnings))
    assert len(warnings) == 2, warnings
    assert "optim.lr = 0.001" in text and "lr = 0.0003" in text and "AdamW" in text
    assert "batch_size = 100" in text and "16 per device x 2 process(es)" in text


def test_missing_and_damaged_files_still_give_a_report(tmp_path: Path) -> None:
    run = _folder(
        tmp_path,
        hyperparams="{not json",
        run=["a", "list"],
        environment={"cuda_devices": "not a list", "world_size": 3},
        results__odd={"confusion_matrix": [[1, 2], [3]], "note": "ragged"},
    )
    page = build_report(run).read_text()
    text = _text(page)
    assert 'id="run-status">unknown<' in page and "not finished" in text
    assert re.search(r"world size\s+3", text) and "Results: odd" in text
    assert 'class="confusion"' not in page, "a ragged matrix is not drawn"
    assert "<h3>Training setup</h3>" in page and "not recorded" in text


def test_an_upload_failure_and_the_recorded_duration_are_shown(tmp_path: Path) -> None:
    info = {
        "status": "upload-failed",
        "started": 1_700_000_000.0,
        "finished": 1_700_000_200.0,
        "duration": 187.5,  # recorded by the run: preferred over finished - started
        "upload_error": "timed out after 30 s",
        "logger_errors": ["tensorboard: disk full"],
    }
    run = _folder(tmp_path, run=info, hyperparams=HYPER)
    page = build_report(run).read_text()
    run_part = page.split("<h2>Run</h2>", 1)[1].split("<h2>", 1)[0]
    assert 'id="run-status">upload-failed<' in run_part
    assert 'data-seconds="187.500">3 min 08 s<' in run_part
    assert "upload failed: timed out after 30 s" in html.unescape(run_part)
    assert "1 logger error(s), first: tensorboard: disk full" in html.unescape(run_part)
