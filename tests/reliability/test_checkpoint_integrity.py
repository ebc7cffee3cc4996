"""Checkpoints never load the wrong thing: damaged, lying, malformed, full disk, odd names.

Each test reproduces a failure seen before checksums existed (bit flips that loaded
silently, an index.json that made an older checkpoint "latest", a bare KeyError on a
malformed file, torch's "unexpected pos" on a full disk, a directory that broke every
later save) and checks the behaviour that replaced it.
"""

from __future__ import annotations

import errno
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tests.common.full_disk import FullDisk
from torch import nn

from scramjet.checkpoint import (
    CheckpointManager,
    CheckpointWriteError,
    CorruptCheckpointError,
    read_checkpoint,
    write_checkpoint,
)
from scramjet.checkpoint.payload import MARKER, TRAILER_SIZE, ChecksumWriter, build_payload
from scramjet.runtime.files import atomic_write


def full_state(seed: int = 0) -> dict[str, Any]:
    """Weights, optimizer state, RNG, numpy and plain history: every kind of entry."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 16)).sum().backward()
    opt.step()
    return {
        "model": model,
        "optimizer": opt,
        "rng": torch.get_rng_state(),
        "order": np.arange(50, dtype=np.int64),
        "history": {"loss": [0.5, 0.25], "note": "epoch 2"},
    }


def flip(data: bytes, offset: int, bit: int) -> bytes:
    damaged = bytearray(data)
    damaged[offset] ^= 1 << bit
    return bytes(damaged)


def sweep(tmp_path: Path, every: int) -> tuple[int, int, list[int]]:
    """Flip one bit in every ``every``-th byte of a checkpoint; (detected, tried, missed)."""
    good = write_checkpoint(tmp_path / "good.pt", full_state(), step=7, fsync=False)
    data = good.read_bytes()
    target = tmp_path / "flipped.pt"
    detected, missed = 0, []
    offsets = range(0, len(data), every)
    for n, offset in enumerate(offsets):
        target.write_bytes(flip(data, offset, n % 8))
        try:
            read_checkpoint(target)
        except CorruptCheckpointError:
            detected += 1
        else:
            missed.append(offset)
    return detected, len(offsets), missed


def test_every_single_bit_flip_is_detected(tmp_path: Path) -> None:
    size = write_checkpoint(tmp_path / "probe.pt", full_state(), fsync=False).stat().st_size
    every = max(1, size // 300)  # ~300 flips spread over header, pickle, tensors, trailer
    detected, tried, missed = sweep(tmp_path, every)
    print(f"bit flips detected: {detected}/{tried} (one bit in every {every}th byte)")
    assert tried >= 200
    assert not missed, f"flips at byte offsets {missed[:20]} loaded silently"


@pytest.mark.slow
def test_every_byte_single_bit_flip_is_detected(tmp_path: Path) -> None:
    detected, tried, missed = sweep(tmp_path, 1)
    print(f"bit flips detected: {detected}/{tried} (one bit in every byte)")
    assert not missed, f"flips at byte offsets {missed[:20]} loaded silently"


def test_a_flipped_latest_falls_back_naming_both_files(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    good = manager.save(full_state(1), step=1)
    bad = manager.save(full_state(2), step=2)
    manager.wait()
    data = bad.read_bytes()
    bad.write_bytes(flip(data, len(data) // 2, 3))  # deep inside the tensor data
    with pytest.raises(CorruptCheckpointError, match=r"checksum mismatch"):
        manager.load(fallback=False)
    with pytest.warns(UserWarning, match=rf"{bad.name}.*checksum.*previous.*{good.name}"):
        result = manager.load()
    assert result.path == good and result.step == 1


def test_files_load_with_plain_torch_load(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    path = manager.save(full_state(), step=3)
    manager.wait()
    for mmap in (False, True):
        payload = torch.load(path, weights_only=True, mmap=mmap)
        assert payload["step"] == 3 and payload[MARKER] == 2
    assert path.read_bytes()[-TRAILER_SIZE:].startswith(b"\nscramjet-checksum 1 ")


def test_a_lying_index_never_makes_an_older_checkpoint_latest(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=None)
    paths = [manager.save({"v": step}, step=step) for step in (10, 20, 30)]
    manager.close()
    index_path = tmp_path / "index.json"
    index = json.loads(index_path.read_text())
    for entry in index["checkpoints"]:  # the newest file claims to be the oldest
        if entry["file"] == paths[2].name:
            entry["seq"], entry["step"] = 0, 5
    index["latest"] = paths[0].name
    index_path.write_text(json.dumps(index))
    fresh = CheckpointManager(tmp_path, keep_last=None)
    assert fresh.latest_path == paths[2]
    assert [(c.seq, c.step) for c in fresh.checkpoints()] == [(1, 10), (2, 20), (3, 30)]
    assert fresh.load().step == 30
    assert fresh.save({"v": 40}, step=40).name == "ckpt-000004-step40.pt"
    fresh.close()


def write_raw(path: Path, obj: Any, checksum: bool) -> None:
    """A file that is not what the manager writes (a bug elsewhere, a foreign tool)."""

    def write(file: Any) -> None:
        if not checksum:
            torch.save(obj, file)
            return
        sink = ChecksumWriter(file)
        torch.save(obj, sink)
        sink.finish()

    atomic_write(path, write, fsync=False)


def malformed(kind: str) -> Any:
    payload = build_payload({"v": 2}, seq=2, step=2, epoch=None, metrics=None)
    if kind == "step missing":
        del payload["step"]
    elif kind == "state not a dict":
        payload["state"] = [1, 2]
    elif kind == "step a string":
        payload["step"] = "2"
    elif kind == "not a dict":
        return [payload]
    return payload


@pytest.mark.parametrize("checksum", [True, False], ids=["format2", "no-trailer"])
@pytest.mark.parametrize(
    "kind", ["step missing", "state not a dict", "step a string", "not a dict"]
)
def test_malformed_layouts_are_corrupt_and_fall_back(
    tmp_path: Path, kind: str, checksum: bool
) -> None:
    manager = CheckpointManager(tmp_path)
    good = manager.save({"v": 1}, step=1)
    manager.wait()
    bad = tmp_path / "ckpt-000002-step2.pt"
    write_raw(bad, malformed(kind), checksum)
    with pytest.raises(CorruptCheckpointError, match=bad.name):
        read_checkpoint(bad)
    with pytest.warns(UserWarning, match=rf"{bad.name}.*previous checkpoint.*{good.name}"):
        result = manager.load()
    assert result.path == good and result.values["v"] == 1


def test_a_removed_trailer_is_detected(tmp_path: Path) -> None:
    path = write_checkpoint(tmp_path / "a.pt", {"v": 1}, fsync=False)
    path.write_bytes(path.read_bytes()[:-TRAILER_SIZE])  # still a valid zip for torch.load
    with pytest.raises(CorruptCheckpointError, match="trailer is missing or damaged"):
        read_checkpoint(path)


def test_format_1_files_still_load(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    state = full_state()
    payload = build_payload(state, seq=1, step=5, epoch=0, metrics={"loss": 0.5})
    payload[MARKER] = 1  # exactly what the previous version wrote: no trailer
    write_raw(tmp_path / "ckpt-000001-step5.pt", payload, checksum=False)
    fresh = full_state(seed=1)
    result = manager.load({"model": fresh["model"], "optimizer": fresh["optimizer"]})
    assert result.step == 5 and result.metrics == {"loss": 0.5}
    for key, value in state["model"].state_dict().items():
        assert torch.equal(fresh["model"].state_dict()[key], value)
    assert manager.save({"v": 2}, step=6).name == "ckpt-000002-step6.pt"
    assert manager.load().step == 6


@pytest.mark.parametrize("async_write", [False, True], ids=["sync", "async"])
def test_disk_full_names_the_file_and_the_free_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, async_write: bool
) -> None:
    manager = CheckpointManager(tmp_path, keep_last=1, async_write=async_write)
    first = manager.save(full_state(), step=1)
    manager.wait()
    FullDisk(monkeypatch, budget=4000, match=lambda name: name.startswith("ckpt-"))
    with pytest.raises(CheckpointWriteError) as info:
        manager.save(full_state(), step=2)
        manager.wait()
    message = str(info.value)
    assert "ckpt-000002-step2.pt" in message and "disk is full" in message, message
    assert "free of" in message and "unexpected pos" not in message, message
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.ENOSPC and not info.value.saved
    assert first.is_file() and manager.load().step == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    monkeypatch.undo()
    with pytest.raises(CheckpointWriteError, match="disk is full"):
        FullDisk(monkeypatch, budget=4000, match=lambda name: name == "single.pt")
        write_checkpoint(tmp_path / "single.pt", full_state())


@pytest.mark.parametrize("async_write", [False, True], ids=["sync", "async"])
def test_an_index_that_does_not_fit_says_the_checkpoint_was_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, async_write: bool
) -> None:
    manager = CheckpointManager(tmp_path, keep_last=1, async_write=async_write)
    first = manager.save({"v": 1}, step=1)
    manager.wait()
    FullDisk(monkeypatch, budget=0, match=lambda name: name == "index.json")
    with pytest.raises(CheckpointWriteError) as info:
        manager.save({"v": 2}, step=2)
        manager.wait()
    message = str(info.value)
    assert "ckpt-000002-step2.pt' was saved and is complete" in message, message
    assert "index.json" in message and "not saved" not in message, message
    assert info.value.saved and info.value.path is not None
    assert manager.load().values["v"] == 2
    manager.wait()
    assert not first.exists(), "rotation still runs: the new checkpoint is durable"


def test_a_directory_in_the_way_is_reported_once_and_skipped(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2)
    manager.save({"v": 1}, step=1)
    manager.wait()
    blocker = tmp_path / "ckpt-000002-step2.pt"
    blocker.mkdir()
    with pytest.warns(RuntimeWarning, match=rf"{blocker.name}.*not a file"):
        path = manager.save({"v": 2}, step=2)
    assert path.name == "ckpt-000003-step2.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        later = [manager.save({"v": s}, step=s) for s in (3, 4)]
        assert manager.load().values["v"] == 4
    assert [c.path for c in manager.checkpoints()] == later
    assert blocker.is_dir()
    manager.close()
