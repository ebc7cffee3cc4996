"""``scramjet demo`` end to end, as a new user runs it (in a subprocess, small sizes)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


def test_demo_runs_end_to_end_and_leaves_a_tracked_run(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "scramjet.cli", "demo", "--epochs", "3", "--samples", "1024",
         "--out", str(out), "--no-dashboard"],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    for step in range(1, 6):
        assert f"[{step}/5]" in text
    accuracy = float(re.search(r"test accuracy: ([\d.]+)%", text).group(1))  # type: ignore[union-attr]
    assert accuracy > 40.0, text  # 4 balanced classes: chance is 25%
    assert re.search(r"throughput: scramjet [\d,]+ samples/s vs plain PyTorch loop [\d,]+", text)
    run_dir = Path(re.search(r"run folder: (.+)", text).group(1).strip())  # type: ignore[union-attr]
    report = Path(re.search(r"report:\s+(.+)", text).group(1).strip())  # type: ignore[union-attr]
    assert report.is_file() and report.stat().st_size > 10_000
    assert run_dir.parent.parent == (out / "runs").resolve()
    for name in ("hyperparams.json", "environment.json", "metrics.csv", "metrics.jsonl"):
        assert (run_dir / name).is_file(), name
    assert any((run_dir / "checkpoints").glob("ckpt-*.pt"))
    assert any((run_dir / "plots").glob("*.png"))
    assert (run_dir / "results" / "test.json").is_file()
    manifests = list((out / "train.pack").glob("manifest.json"))
    assert manifests, "the demo packs its images"
    assert len(list((out / "images" / "train").glob("*.jpg"))) == 1024


def test_demo_rejects_bad_options(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "scramjet.cli", "demo", "--epochs", "0", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "--epochs" in proc.stderr + proc.stdout


@pytest.mark.slow  # the progress display in a real terminal: tests/callbacks/test_progress_tmux.py
def test_demo_in_a_real_terminal_shows_progress_and_curves(tmp_path: Path) -> None:
    from tests.dashboard.tmux_helpers import run_in_tmux

    command = [sys.executable, "-m", "scramjet.cli", "demo", "--epochs", "2", "--samples", "512",
               "--out", str(tmp_path / "demo")]  # fmt: skip
    screen = run_in_tmux(command, width=120, height=70, wait_for=r"report:\s", timeout=240)
    lines = screen.splitlines()
    assert any(
        re.search(r"^train\s+epoch 2/2\s+█+\s+8/8\s+[\d,]+ samples/s", ln) for ln in lines
    ), screen
    assert any(re.search(r"^eval\s+epoch 2/2", ln) for ln in lines), screen
    curve_rows = [ln for ln in lines if "┤" in ln]
    assert len(curve_rows) >= 4, screen
    assert "test accuracy:" in screen and "throughput: scramjet" in screen


def test_nebulae_package_resolves_submodules_and_augmentations_lazily() -> None:
    code = (
        "import scramjet.compat.nebulae as neb; "
        "from scramjet.data.augment import Flip; "
        "assert neb.cockpit.TimeMachine is neb.TimeMachine; "
        "assert neb.Flip is Flip; assert neb.fuel.Tank is neb.Tank"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
