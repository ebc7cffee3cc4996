"""A manager opened on a folder that another live run saves checkpoints into is told so
when it is created, before its first save rotates away the other run's files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from scramjet.checkpoint import CheckpointManager

WRITER = textwrap.dedent(
    """
    import sys, time, torch
    from scramjet.checkpoint import CheckpointManager
    manager = CheckpointManager(sys.argv[1], keep_last=1)
    manager.save({"w": torch.ones(2)}, step=1)
    manager.wait()
    print("saved", flush=True)
    if sys.argv[2] == "stay":
        time.sleep(60)
    else:
        manager.close()
    """
)


def start_writer(folder: Path, mode: str) -> subprocess.Popen[str]:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder), mode], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "saved"
    return writer


def test_a_second_run_in_a_live_runs_folder_is_warned_at_creation(tmp_path: Path) -> None:
    writer = start_writer(tmp_path, "stay")
    try:
        with pytest.warns(RuntimeWarning, match=rf"pid {writer.pid}.*its own folder"):
            CheckpointManager(tmp_path, keep_last=1)
    finally:
        writer.kill()
        writer.wait()


def test_a_folder_whose_run_ended_or_this_process_writes_gives_no_warning(
    tmp_path: Path,
) -> None:
    start_writer(tmp_path, "close").wait()
    mine = CheckpointManager(tmp_path / "mine", async_write=False)
    mine.save({"w": torch.zeros(1)}, step=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CheckpointManager(tmp_path)  # the writer has ended
        CheckpointManager(tmp_path / "mine").save({"w": torch.zeros(1)}, step=2)
