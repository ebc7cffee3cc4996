"""atomic_write against real files: what a replaced file keeps, and names near the limit."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from scramjet.runtime.files import atomic_write_bytes, atomic_write_text


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o664])
def test_replacing_a_file_keeps_its_permissions(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "secrets.json"
    target.write_text("{}")
    os.chmod(target, mode)
    atomic_write_text(target, '{"token": "x"}')
    assert target.read_text() == '{"token": "x"}'
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_a_new_file_gets_the_usual_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "new.bin", b"x", fsync=False)
        reference = tmp_path / "plain.bin"
        reference.write_bytes(b"x")
    finally:
        os.umask(umask)
    made = stat.S_IMODE((tmp_path / "new.bin").stat().st_mode)
    assert made == stat.S_IMODE(reference.stat().st_mode)


@pytest.mark.parametrize("name", ["x" * 250 + ".pt", "é" * 125 + ".pt"])
def test_a_long_file_name_the_folder_accepts_can_be_written(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    target.write_bytes(b"old")  # the name itself is fine for this file system
    atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == [name]  # no temporary left behind


def test_a_missing_folder_is_named_not_the_hidden_temporary(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "exp1" / "metrics.json"
    with pytest.raises(FileNotFoundError) as info:
        atomic_write_text(target, "{}")
    message = str(info.value)
    assert str(target.parent) in message and "mkdir" in message
    assert ".tmp-" not in message
    assert not (tmp_path / "runs").exists()  # nothing created on the way
