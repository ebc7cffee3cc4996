"""Upload threads end with the storage that started them.

A hyperparameter sweep in one process makes a remote checkpoint manager per trial. Each
manager's storage uploads on threads of its own; once the manager is closed and dropped, they
must end (after sending what was queued) instead of waiting forever on an empty queue,
each holding its storage and its client."""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)
from torch import nn

from scramjet.checkpoint.remote import RemoteCheckpointManager
from scramjet.tracking.storage import RunStorage


def _upload_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("scramjet-upload-")}


def _end_within(threads: set[threading.Thread], seconds: float) -> list[str]:
    """The names of ``threads`` still alive after ``seconds``."""
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return sorted(t.name for t in threads if t.is_alive())


def test_closed_and_dropped_managers_leave_no_upload_threads(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    before = _upload_threads()
    started: set[threading.Thread] = set()
    for trial in range(3):
        url = f"s3://{bucket}/trial{trial}"
        with RemoteCheckpointManager(url, tmp_path / f"trial{trial}", keep_last=1) as manager:
            manager.save({"model": nn.Linear(2, 2)}, step=1)
            started |= _upload_threads() - before
        del manager
    assert len(started) >= 3, started  # at least one per manager's storage
    gc.collect()
    assert _end_within(started, 10.0) == []
    keys = s3.list_keys(bucket)
    for trial in range(3):  # every checkpoint reached the store before its threads ended
        assert f"trial{trial}/ckpt-000001-step1.pt" in keys, keys


def test_a_dropped_storage_sends_what_it_queued_then_its_threads_end(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    local = tmp_path / "run"
    local.mkdir()
    sizes = {f"part{i}.bin": (i + 1) << 18 for i in range(6)}  # 256 KiB to 1.5 MiB
    for name, size in sizes.items():
        (local / name).write_bytes(bytes([len(name)]) * size)
    before = _upload_threads()
    storage = RunStorage(local, f"s3://{bucket}/run")
    threads = _upload_threads() - before
    for name in sizes:
        storage.upload(name)
    del storage  # nobody holds it now, but its queue is not empty
    gc.collect()
    assert _end_within(threads, 30.0) == []
    assert s3.list_keys(bucket) == {f"run/{name}": size for name, size in sizes.items()}
