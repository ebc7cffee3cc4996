"""A pack killed mid-write (SIGKILL, OOM), then run again into the same folder: the old
pack stays readable meanwhile, and the half-written copy the killed run left is removed by
the next pack there, while the copy of a pack still running is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from scramjet.data import PackedDataset, pack

_WRITE_THEN_WAIT = textwrap.dedent("""
    import sys, time
    import scramjet.data.writer as w
    real = w.file_sha256
    def slow(path):
        digest = real(path)
        open(sys.argv[3] + ".ready", "w").close()  # a shard is written: the pack is mid-way
        time.sleep(60)
        return digest
    w.file_sha256 = slow
    w.pack(sys.argv[1], sys.argv[2], sys.argv[3], dtype=["int64"], height=8, width=8,
           shards=3, workers=0, progress=False, overwrite=True)
""")


def _start_pack(root: Path, dst: Path) -> subprocess.Popen[bytes]:
    """A pack into ``dst`` in another process, waiting (alive) once a shard is written."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITE_THEN_WAIT, str(root), str(root / "list.csv"), str(dst)]
    )
    deadline = time.monotonic() + 60
    while not Path(f"{dst}.ready").exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    return proc


def _partials(dst: Path) -> list[str]:
    return sorted(p.name for p in dst.parent.iterdir() if p.name.startswith(f".{dst.name}."))


def _pack(root: Path, dst: Path) -> None:
    pack(root, root / "list.csv", dst, dtype=["int64"], height=8, width=8, shards=3,
         workers=0, progress=False, overwrite=True)  # fmt: skip


def test_a_rerun_after_a_killed_pack_removes_its_half_written_copy(
    folder: tuple[Path, list[tuple[str, np.ndarray]]], tmp_path: Path
) -> None:
    root, _ = folder
    dst = tmp_path / "p"
    _pack(root, dst)
    proc = _start_pack(root, dst)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert len(_partials(dst)) == 1  # what the killed run left
    assert PackedDataset(dst)[list(range(12))]["label"].tolist() == [i % 4 for i in range(12)]
    os.unlink(f"{dst}.ready")
    _pack(root, dst)
    assert _partials(dst) == [], "the killed run's half-written pack stays on disk"
    assert len(PackedDataset(dst)) == 12


def test_a_pack_running_into_the_same_folder_keeps_its_copy(
    folder: tuple[Path, list[tuple[str, np.ndarray]]], tmp_path: Path
) -> None:
    root, _ = folder
    dst = tmp_path / "p"
    proc = _start_pack(root, dst)
    try:
        running = _partials(dst)
        _pack(root, tmp_path / "p")
        assert _partials(dst) == running and proc.poll() is None
    finally:
        proc.kill()
        proc.wait(10)


def test_a_rerun_removes_the_old_pack_a_killed_overwrite_was_deleting(
    folder: tuple[Path, list[tuple[str, np.ndarray]]], tmp_path: Path
) -> None:
    root, _ = folder
    dst = tmp_path / "p"
    _pack(root, dst)
    # what an overwrite killed while deleting the replaced pack leaves: that pack, moved
    # aside under the hidden name publish gives it, half deleted
    aside = tmp_path / ".p.old-0123456789ab"
    _pack(root, aside)
    (aside / "manifest.json").unlink()
    _pack(root, dst)
    assert _partials(dst) == [], "the replaced pack stays on disk under a hidden name"
    assert len(PackedDataset(dst)) == 12
