"""``dst=""`` (an unset variable, ``pack(..., os.environ.get("OUT", ""))``) is refused: it
used to mean the current folder, so with ``overwrite=True`` an empty working folder was
replaced by the pack, and the shell was left in a folder that no longer existed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from scramjet.data import pack


def _images(tmp_path: Path) -> Path:
    root = tmp_path / "raw"
    root.mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(root / "0.png")
    (root / "list.csv").write_text("image,label\n0.png,1\n")
    return root


def test_an_empty_dst_is_refused_and_the_working_folder_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _images(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ValueError, match=r"dst is empty \(''\)"):
        pack(root, root / "list.csv", "", dtype=["int64"], height=4, width=4, workers=0,
             progress=False, overwrite=True)  # fmt: skip
    assert work.is_dir() and not (work / "manifest.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw", "work"]


def test_the_cli_refuses_it_in_one_line(tmp_path: Path) -> None:
    root = _images(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "scramjet", "pack", str(root), str(root / "list.csv"), "",
         "--dtype", "int64", "--height", "4", "--width", "4", "--overwrite"],
        capture_output=True, text=True, timeout=120, cwd=work,
    )  # fmt: skip
    assert done.returncode != 0 and work.is_dir(), done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "dst is empty" in lines[0], done.stderr
