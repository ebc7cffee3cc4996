"""Background checkpoint writes: snapshots, visibility, failures, flushing at exit."""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from tests.common.full_disk import FullDisk
from torch import nn

from scramjet.checkpoint import CheckpointManager, CheckpointWriteError, read_checkpoint

BIG = 1 << 22  # 16 MiB of float32: long enough to write that save() returns first


def test_save_returns_a_snapshot_taken_before_it_returned(tmp_path: Path) -> None:
    model = nn.Linear(4, 4)
    base = torch.arange(12.0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    manager = CheckpointManager(tmp_path)
    manager.save({"model": model, "view": base[2:5], "base": base, "big": torch.ones(BIG)}, step=1)
    with torch.no_grad():  # the loop changes everything as soon as save() returns
        model.weight.add_(1.0)
        base.add_(100.0)
    fresh = nn.Linear(4, 4)
    result = manager.load({"model": fresh})
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in before.items())
    assert torch.equal(result.values["view"], torch.tensor([2.0, 3.0, 4.0]))
    assert torch.equal(result.values["base"], torch.arange(12.0))
    assert torch.equal(result.values["big"], torch.ones(BIG))


def test_shared_storages_stay_shared_in_the_file(tmp_path: Path) -> None:
    weight = torch.randn(64, 64)
    manager = CheckpointManager(tmp_path)
    path = manager.save({"a": weight, "tied": weight, "row": weight[3]}, step=1)
    manager.wait()
    state = torch.load(path, weights_only=True)["state"]
    a, tied, row = state["a"], state["tied"], state["row"]
    assert a.untyped_storage().data_ptr() == tied.untyped_storage().data_ptr()
    assert row.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert torch.equal(row, weight[3]) and path.stat().st_size < 2 * weight.nbytes


def test_sparse_tensors_are_serialised_into_memory_instead(tmp_path: Path) -> None:
    sparse = torch.eye(5).to_sparse()
    manager = CheckpointManager(tmp_path)
    manager.save({"sparse": sparse, "dense": torch.ones(3)}, step=1)
    values = manager.load().values
    assert torch.equal(values["sparse"].to_dense(), torch.eye(5))


def test_a_pending_write_is_visible_to_every_reader_in_the_process(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2)
    seen_pending = False
    for step in range(1, 6):
        path = manager.save({"big": torch.full((BIG,), float(step))}, step=step)
        seen_pending |= manager.pending
        if step % 2:  # the same manager
            assert manager.latest_path == path
        else:  # another manager of the same directory, and the plain reader
            assert CheckpointManager(tmp_path, keep_last=None).load().step == step
            assert read_checkpoint(path)["step"] == step
    assert seen_pending, "save() never returned before its write finished: nothing was tested"
    assert len(manager.checkpoints()) == 2


def test_a_failed_background_write_is_raised_and_keeps_earlier_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = CheckpointManager(tmp_path, keep_last=1)
    first = manager.save({"v": 1}, step=1)
    manager.wait()
    full = FullDisk(monkeypatch)  # every write of a checkpoint file fails with ENOSPC
    assert manager.save({"v": 2, "big": torch.ones(BIG)}, step=2).name == "ckpt-000002-step2.pt"
    with pytest.raises(
        CheckpointWriteError, match=r"ckpt-000002-step2\.pt.*disk is full.*earlier checkpoints"
    ) as info:
        manager.wait()
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.ENOSPC
    assert not info.value.saved
    assert first.is_file(), "a failed write must not rotate an earlier checkpoint away"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    assert manager.load().values["v"] == 1  # reported once; the manager goes on working

    # Raised by the next call of any kind, not only by wait().
    manager.save({"v": 2}, step=2)
    with pytest.raises(CheckpointWriteError, match="disk is full"):
        manager.save({"v": 3}, step=3)
    full.undo()
    manager.save({"v": 4}, step=4)
    manager.close()
    assert [c.step for c in manager.checkpoints()] == [4] and not first.exists()


def test_restart_keeps_earlier_checkpoints_and_numbering(tmp_path: Path) -> None:
    with CheckpointManager(tmp_path, keep_last=None) as manager:
        for step in (1, 2):
            manager.save({"v": step}, step=step)
    assert not manager.pending
    again = CheckpointManager(tmp_path, keep_last=None)
    path = again.save({"v": 1}, step=1)
    again.close()
    assert path.name == "ckpt-000003-step1.pt"
    assert [c.step for c in again.checkpoints()] == [1, 2, 1]


def test_sync_mode_writes_inside_save(tmp_path: Path) -> None:
    saved = []
    manager = CheckpointManager(tmp_path, keep_last=1, async_write=False, on_saved=saved.append)
    for step in (1, 2):
        path = manager.save({"v": step}, step=step)
        assert path.is_file() and not manager.pending
    assert [info.step for info in saved] == [1, 2]
    assert manager.load().values["v"] == 2


def test_on_saved_runs_once_the_file_is_durable(tmp_path: Path) -> None:
    seen: list[tuple[int, bool]] = []
    manager = CheckpointManager(
        tmp_path, on_saved=lambda info: seen.append((info.step, info.path.is_file()))
    )
    manager.save({"big": torch.ones(BIG)}, step=5)
    manager.wait()
    assert seen == [(5, True)]


def _run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_script_that_ends_right_after_save_keeps_its_checkpoint(tmp_path: Path) -> None:
    done = _run_script(
        tmp_path,
        """
        import sys, torch
        from scramjet.checkpoint import CheckpointManager
        manager = CheckpointManager(sys.argv[1])
        manager.save({"big": torch.full((1 << 23,), 3.0)}, step=9)
        """,
    )
    assert done.returncode == 0, done.stderr
    result = CheckpointManager(tmp_path / "ckpt").load()
    assert result.step == 9 and torch.equal(result.values["big"], torch.full((1 << 23,), 3.0))


def test_a_failure_still_pending_at_exit_is_printed(tmp_path: Path) -> None:
    done = _run_script(
        tmp_path,
        """
        import errno, os, sys, torch
        import scramjet.checkpoint.records as records_module
        import scramjet.checkpoint.payload as payload_module
        from scramjet.checkpoint import CheckpointManager

        def full_disk(path, write, fsync=True):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        records_module.atomic_write = payload_module.atomic_write = full_disk
        manager = CheckpointManager(sys.argv[1])
        manager.save({"big": torch.ones(1 << 20)}, step=1)
        """,
    )
    assert "ckpt-000001-step1.pt" in done.stderr and "disk is full" in done.stderr, done.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_are_snapshotted_to_host(tmp_path: Path) -> None:
    model = nn.Linear(256, 256).cuda()
    before = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    manager = CheckpointManager(tmp_path)
    for step in (1, 2):  # the second save reuses the pinned buffers of the first
        manager.save({"model": model}, step=step)
        with torch.no_grad():
            model.weight.add_(1.0)
        fresh = nn.Linear(256, 256)
        manager.load({"model": fresh})
        assert all(torch.equal(fresh.state_dict()[k], v) for k, v in before.items())
        before = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def test_a_closed_manager_leaves_no_entry_for_its_folder(tmp_path: Path) -> None:
    from scramjet.checkpoint import manager as manager_module

    for run in range(3):
        manager = CheckpointManager(tmp_path / f"run{run}" / "ckpt")
        manager.save({"w": torch.ones(4)}, step=1)
        manager.close()
    keys = [k for k in manager_module._WRITERS if k.startswith(str(tmp_path.resolve()))]
    assert keys == []
