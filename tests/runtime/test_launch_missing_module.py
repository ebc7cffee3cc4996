"""`scramjet launch -m MODULE` with a module that cannot be found: one line, exit 2, before
any process starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scramjet.cli import main


def test_a_missing_module_is_one_line_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["launch", "--nproc-per-node", "2", "-m", "no_such_training_module"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scramjet launch: error: ") and err.count("\n") == 1, err
    assert "'no_such_training_module'" in err and "Traceback" not in err


def test_a_script_file_given_to_dash_m_says_to_leave_out_dash_m(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    assert main(["launch", "-m", "train.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "without -m" in err, err


def test_a_package_module_in_the_working_folder_still_runs(tmp_path: Path) -> None:
    package = tmp_path / "jobs"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(
        "import os\nfrom pathlib import Path\nPath(f\"rank{os.environ['RANK']}.txt\").touch()\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scramjet.cli",
            "launch",
            "--nproc-per-node",
            "2",
            "-m",
            "jobs.train",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "rank0.txt").exists() and (tmp_path / "rank1.txt").exists()
