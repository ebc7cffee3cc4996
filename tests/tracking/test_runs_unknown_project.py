"""``scramjet runs --project NAME`` naming no project exits 1 with the projects that exist
on stderr, as a missing root does: it exited 0, so a script could not tell a typo from an
empty listing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tracking_helpers import make_trainer, tiny_data

from scramjet.cli import main
from scramjet.tracking import Experiment


def test_unknown_project_exits_1_naming_the_projects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for project in ("mnist", "cifar"):
        exp = Experiment(project, "mlp", root=tmp_path, checkpoint=None, save_script=False)
        make_trainer([exp]).train(tiny_data(16), 1, per_device_batch_size=16)
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--project", "mnsit"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    assert "'mnsit'" in captured.err and "cifar, mnist" in captured.err, captured.err
    assert main(["runs", str(tmp_path), "--project", "mnist"]) == 0
    assert "mnist/mlp_" in capsys.readouterr().out
    assert main(["runs", str(tmp_path / "mnist"), "--project", "mnist"]) == 0


def test_unknown_project_under_an_empty_root_and_an_empty_listing(tmp_path: Path) -> None:
    def scramjet(*args: str) -> subprocess.CompletedProcess[str]:
        code = "import sys; from scramjet.cli import main; sys.exit(main(sys.argv[1:]))"
        command = [sys.executable, "-c", code, "runs", str(tmp_path), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    done = scramjet("--project", "nope")
    assert done.returncode == 1 and "'nope'" in done.stderr and "no runs" in done.stderr
    empty = scramjet()  # an empty root is an empty listing: not an error
    assert empty.returncode == 0 and "No runs under" in empty.stdout, empty
