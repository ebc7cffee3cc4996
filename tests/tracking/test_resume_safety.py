"""What an Experiment may continue: only a run folder it created, and only one that no other
live process on this host is training in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.tracking import Experiment


def _finished_run(root: Path) -> Path:
    exp = Experiment("p", "e", root=root, checkpoint="end", save_script=False)
    make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=32)
    return exp.run_dir


@pytest.mark.parametrize("resume", ["", ".", "root", "project", "checkpoints"])
def test_resume_refuses_a_folder_that_is_not_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resume: str
) -> None:
    root = tmp_path / "runs"
    run = _finished_run(root)
    work = tmp_path / "work"  # the working directory, holding a file of the user's
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    monkeypatch.chdir(work)
    target = {
        "root": str(root),
        "project": str(root / "p"),
        "checkpoints": str(run / "checkpoints"),
    }
    exp = Experiment("p", "e", root=root, resume=target.get(resume, resume), save_script=False)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(Exception, match="is not a run folder") as raised:
        make_trainer([exp]).train(tiny_data(), 1, per_device_batch_size=32)
    error = raised.value.__cause__
    assert isinstance(error, FileNotFoundError), "the Trainer names the Experiment's error"
    assert "resume='latest'" in str(error) and "resume=None" in str(error)
    if resume == "checkpoints":
        assert f"inside the run folder {str(run)!r}" in str(error)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, (
        "nothing written anywhere"
    )


def test_a_run_folder_in_use_by_a_live_process_is_not_continued(tmp_path: Path) -> None:
    run = _finished_run(tmp_path)
    info = json.loads((run / "run.json").read_text())
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:  # the run.json another process training in this folder keeps
        (run / "run.json").write_text(json.dumps({**info, "status": "running", "pid": other.pid}))
        metrics = (run / "metrics.csv").read_bytes()
        for resume in ("latest", str(run)):
            exp = Experiment("p", "e", root=tmp_path, resume=resume, save_script=False)
            with pytest.raises(RuntimeError, match=f"in use.*pid {other.pid}"):
                make_trainer([exp]).train(tiny_data(), 2, per_device_batch_size=32)
            assert exp._run_dir is None, "the Experiment did not take the folder"
        assert json.loads((run / "run.json").read_text())["pid"] == other.pid
        assert (run / "metrics.csv").read_bytes() == metrics
    finally:
        other.kill()
        other.wait()
    # once that process is gone (a crashed run), the folder is continued
    exp = Experiment("p", "e", root=tmp_path, resume="latest", save_script=False)
    make_trainer([exp]).train(tiny_data(), 2, per_device_batch_size=32)
    assert exp.run_dir == run
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
