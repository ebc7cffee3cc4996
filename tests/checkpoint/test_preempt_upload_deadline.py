"""The save at preemption gives its uploads a bounded time (``limit_uploads``), waits for
the local write whatever happens, and leaves what it could not upload to the next run.

A real S3 server (moto) on 127.0.0.1 plays the store that goes down; ``file://`` stores
play one that hangs in the middle of an upload.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.tracking.s3_helpers import S3Server, s3, s3_server  # noqa: F401  (fixtures)

from scramjet.callbacks import SaveTrainingStateCallback
from scramjet.checkpoint import CheckpointWriteError, read_checkpoint
from scramjet.checkpoint.remote import RemoteCheckpointManager

pytestmark = pytest.mark.filterwarnings("ignore:.*could not prepare.*")


def remote_names(server: S3Server, bucket: str) -> list[str]:
    return sorted(k.rsplit("/", 1)[-1] for k in server.list_keys(bucket) if "/ckpt-" in k)


def non_daemon_threads(before: set[threading.Thread] | None = None) -> list[str]:
    """Threads that keep the process alive, less those in ``before`` (started by earlier
    tests of the same process, such as a library's long-lived pool)."""
    main, old = threading.main_thread(), before or set()
    return [
        t.name for t in threading.enumerate() if not t.daemon and t is not main and t not in old
    ]


@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
def test_a_limit_set_during_an_upload_bounds_the_save_and_close_and_the_next_manager_uploads(
    s3: S3Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/ckpt"
    before = set(threading.enumerate())
    manager = RemoteCheckpointManager(url, tmp_path, keep_last=None)
    manager.save({"w": torch.full((3,), 1.0)}, step=1)
    manager.wait()
    s3.stop()
    try:
        manager.save({"w": torch.full((3,), 2.0)}, step=2)  # its upload retries...
        time.sleep(0.5)
        started = time.monotonic()
        manager.limit_uploads(1.0)  # ...when the preemption comes
        manager.save({"w": torch.full((3,), 3.0)}, step=3)
        with pytest.raises(CheckpointWriteError) as caught:
            manager.close()  # close() names them all: no warning per file
        took = time.monotonic() - started
    finally:
        s3.start()
    # Before: the save and close() waited for every retry of both uploads.
    assert took < 4.0, f"{took:.1f} s"
    failure = caught.value
    assert failure.saved
    message = str(failure)
    assert "ckpt-000002-step2.pt, ckpt-000003-step3.pt" in message
    assert "after the 1 s they are given at preemption" in message
    assert "resumes from the newest of them and uploads them" in message
    newest = tmp_path / "ckpt-000003-step3.pt"
    assert torch.equal(read_checkpoint(newest)["state"]["w"], torch.full((3,), 3.0))
    assert non_daemon_threads(before) == []  # nothing left running keeps the process alive

    with pytest.warns(RuntimeWarning, match="ckpt-000003-step3.pt.*uploaded with the next save"):
        again = RemoteCheckpointManager(url, tmp_path, keep_last=None)
    again.save({"w": torch.full((3,), 4.0)}, step=4)
    again.close()
    assert remote_names(s3, bucket) == [f"ckpt-00000{i}-step{i}.pt" for i in range(1, 5)]


def _hang_halfway(monkeypatch: pytest.MonkeyPatch, fs: Any, release: threading.Event) -> None:
    """Every upload through ``fs`` writes half the file, then waits for ``release``."""

    def put_file(local: str, remote: str, **kwargs: Any) -> None:
        data = Path(local).read_bytes()
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        Path(remote).write_bytes(data[: len(data) // 2])
        release.wait(30)
        raise ConnectionError("the store stopped answering")

    monkeypatch.setattr(fs, "put_file", put_file)


def test_an_upload_abandoned_at_the_limit_leaves_no_partial_checkpoint_on_a_file_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    before = set(threading.enumerate())
    manager = RemoteCheckpointManager(f"file://{store}", tmp_path / "local", keep_last=None)
    release = threading.Event()
    _hang_halfway(monkeypatch, manager.storage.fs, release)
    try:
        manager.limit_uploads(0.5)
        started = time.monotonic()
        manager.save({"w": torch.arange(1000.0)}, step=1)
        with pytest.raises(CheckpointWriteError, match=r"ckpt-000001-step1\.pt"):
            manager.close()
        assert time.monotonic() - started < 3.0
        assert non_daemon_threads(before) == []
        # The half-written upload has a temporary name; no checkpoint name is partial.
        assert [p.name for p in store.iterdir()] != []
        assert not list(store.glob("ckpt-*.pt"))
        assert read_checkpoint(tmp_path / "local" / "ckpt-000001-step1.pt")["step"] == 1
    finally:
        release.set()


def test_without_a_limit_an_upload_to_a_file_store_is_retried_until_it_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    manager = RemoteCheckpointManager(f"file://{store}", tmp_path / "local", keep_last=None)
    fs = manager.storage.fs
    put = fs.put_file
    failures = [ConnectionError("first try"), ConnectionError("second try")]

    def flaky(local: str, remote: str, **kwargs: Any) -> None:
        if failures:
            raise failures.pop(0)
        put(local, remote, **kwargs)

    monkeypatch.setattr(fs, "put_file", flaky)
    manager.save({"w": torch.ones(4)}, step=1)
    manager.close()  # no error: the third try went through
    assert [p.name for p in store.glob("ckpt-*.pt")] == ["ckpt-000001-step1.pt"]
    assert read_checkpoint(store / "ckpt-000001-step1.pt")["step"] == 1


@pytest.mark.parametrize("seconds", [-1, True, "10", float("nan")])
def test_a_limit_that_is_not_a_number_of_seconds_is_refused(
    tmp_path: Path, seconds: object
) -> None:
    manager = RemoteCheckpointManager(f"file://{tmp_path / 'store'}", tmp_path / "local")
    with pytest.raises(ValueError, match=f"seconds ≥ 0.*received {seconds!r}"):
        manager.limit_uploads(seconds)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=f"preemption_upload_seconds.*received {seconds!r}"):
        SaveTrainingStateCallback("s3://bucket/run", preemption_upload_seconds=seconds)  # type: ignore[arg-type]
