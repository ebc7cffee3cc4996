"""No call of a remote checkpoint to its store waits without a bound.

- The manager opened by the save at preemption lists the store within the upload limit
  (a real socket on 127.0.0.1 that accepts connections and never answers plays an S3
  endpoint behind a black hole).
- Stores that are not object stores (``file://``, ``memory://``) give every put, move and
  delete a deadline (``StorageTimeouts.call``, plus the transfer time at ``min_rate``); a
  call that hangs is one failed attempt.
- Temporary upload files left on the store by an earlier process are removed with the
  remote rotation; those of this process's uploads still running are left alone.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.common.world import blobs, make_trainer

from scramjet.callbacks import SaveTrainingStateCallback, TrainerCallback
from scramjet.checkpoint import CheckpointWriteError, read_checkpoint
from scramjet.checkpoint.remote import RemoteCheckpointManager, write_remote_checkpoint
from scramjet.runtime.preemption import TrainingPreempted
from scramjet.tracking.storage import StorageTimeouts

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:.*could not prepare.*"),
]

FAST = StorageTimeouts(call=0.3)


class BlackHole:
    """A TCP server on 127.0.0.1 that accepts every connection and never sends a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.connections.append(connection)

    def close(self) -> None:
        self.sock.close()
        for connection in self.connections:
            connection.close()


@pytest.fixture()
def black_hole(monkeypatch: pytest.MonkeyPatch) -> Iterator[BlackHole]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    server = BlackHole()
    yield server
    server.close()


def options(server: BlackHole) -> dict[str, Any]:
    return {"client_kwargs": {"endpoint_url": server.endpoint}}


class TermAt(TrainerCallback):
    """Sends SIGTERM to this process at one optimizer step, and notes when."""

    def __init__(self, step: int) -> None:
        self.at = step
        self.sent = 0.0

    def on_optimizer_step_end(self, trainer: Any, **kwargs: Any) -> None:
        if trainer.state.global_step == self.at:
            self.sent = time.monotonic()
            os.kill(os.getpid(), signal.SIGTERM)


# ------------------------------------------------------------------ defect 1


@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_first_save_at_preemption_is_bounded_by_the_limit_on_a_silent_store(
    black_hole: BlackHole, tmp_path: Path
) -> None:
    local = tmp_path / "local"
    save = SaveTrainingStateCallback(
        f"s3://bucket-{uuid.uuid4().hex[:8]}/run",
        every_n_epochs=None,  # no save before the preemption: its manager opens then
        local_dir=local,
        storage_options=options(black_hole),
        preemption_upload_seconds=1.0,
    )
    term = TermAt(2)
    trainer = make_trainer(callbacks=[term, save])
    with pytest.raises(TrainingPreempted) as stopped:
        trainer.train(blobs(n=32), num_epochs=1, per_device_batch_size=4)
    took = time.monotonic() - term.sent
    # Before: the listing at the manager's construction took botocore's read timeout
    # times its attempts (and s3fs's own retries): minutes, past the scheduler's kill.
    assert took < 1.0 + 3.0, f"{took:.1f} s"
    assert stopped.value.step == 2
    newest = local / "ckpt-000001-step2.pt"
    assert stopped.value.checkpoint == str(newest)
    assert read_checkpoint(newest)["step"] == 2
    save.close()  # already reported by the preemption: no second error


@pytest.mark.serial  # a wall-clock bound: run alone, not beside other tests
def test_a_manager_opened_with_a_limit_lists_a_silent_store_within_it(
    black_hole: BlackHole, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.warns(RuntimeWarning, match=r"could not list s3://.*TimeoutError"):
        manager = RemoteCheckpointManager(
            f"s3://bucket-{uuid.uuid4().hex[:8]}/run",
            tmp_path,
            storage_options=options(black_hole),
            upload_limit=1.0,
        )
    manager.save({"w": torch.ones(3)}, step=5)
    with pytest.raises(CheckpointWriteError, match="after the 1 s they are given") as caught:
        manager.close()
    took = time.monotonic() - started
    assert took < 1.0 + 3.0, f"{took:.1f} s"
    assert caught.value.saved
    assert read_checkpoint(tmp_path / "ckpt-000001-step5.pt")["step"] == 5


def test_an_upload_limit_that_is_not_a_number_of_seconds_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"upload_limit must be a number of seconds.*'1'"):
        RemoteCheckpointManager(f"file://{tmp_path / 'store'}", tmp_path, upload_limit="1")  # type: ignore[arg-type]


# ------------------------------------------------------------------ defect 2


def _hang(
    monkeypatch: pytest.MonkeyPatch, target: Any, method: str, release: threading.Event
) -> None:
    """``target.method`` (a file system, or its class) waits for ``release``, then fails;
    a put to a local file system writes half the file first."""

    def hang(*args: Any, **kwargs: Any) -> None:
        if method == "put_file" and not isinstance(target, type):
            local, remote = args[-2], args[-1]
            data = Path(local).read_bytes()
            Path(remote).parent.mkdir(parents=True, exist_ok=True)
            Path(remote).write_bytes(data[: len(data) // 2])
        release.wait(30)
        raise ConnectionError("the store stopped answering")

    monkeypatch.setattr(target, method, hang)


@pytest.mark.parametrize("method", ["put_file", "mv"])
def test_a_hanging_call_to_a_file_store_is_a_failed_attempt_without_a_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    store = tmp_path / "store"
    manager = RemoteCheckpointManager(
        f"file://{store}", tmp_path / "local", keep_last=None, upload_attempts=2, timeouts=FAST
    )
    release = threading.Event()
    _hang(monkeypatch, manager.storage.fs, method, release)
    try:
        started = time.monotonic()
        with pytest.warns(RuntimeWarning, match=r"ckpt-000001-step1\.pt.*not uploaded.*took more"):
            manager.save({"w": torch.arange(1000.0)}, step=1)
            manager.wait()
        with pytest.raises(CheckpointWriteError, match=r"ckpt-000001-step1\.pt") as caught:
            manager.close()
        # Before: save() and close() waited for the hanging call (here until release).
        assert time.monotonic() - started < 8.0
        assert caught.value.saved
        assert not list(store.glob("ckpt-*.pt"))  # nothing partial under the name
        assert read_checkpoint(tmp_path / "local" / "ckpt-000001-step1.pt")["step"] == 1
    finally:
        release.set()
    # The abandoned calls tidy up behind them once they end: no temporary file is left.
    for _ in range(50):
        if not list(store.glob(".*.uploading")):
            break
        time.sleep(0.1)
    assert not list(store.glob(".*.uploading"))


def test_write_remote_checkpoint_to_a_hanging_store_fails_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsspec.implementations.memory import MemoryFileSystem

    url = f"memory://bounded-{uuid.uuid4().hex[:8]}/run/last.pt"
    write_remote_checkpoint(url, {"w": torch.zeros(3)}, step=1, local_dir=tmp_path / "a")
    release = threading.Event()
    _hang(monkeypatch, MemoryFileSystem, "put_file", release)
    try:
        started = time.monotonic()
        with pytest.raises(CheckpointWriteError, match=r"was not saved.*took more") as caught:
            write_remote_checkpoint(
                url,
                {"w": torch.ones(3)},
                step=2,
                local_dir=tmp_path / "b",
                upload_attempts=2,
                timeouts=FAST,
            )
        assert time.monotonic() - started < 5.0
        assert caught.value.saved and read_checkpoint(caught.value.path)["step"] == 2
    finally:
        release.set()
    monkeypatch.undo()
    fs = MemoryFileSystem()
    path = url.split("://", 1)[1]
    with fs.open(path, "rb") as file:  # the earlier file, unchanged
        (tmp_path / "back.pt").write_bytes(file.read())
    assert read_checkpoint(tmp_path / "back.pt")["step"] == 1
    fs.rm(f"/{path.split('/', 1)[0]}", recursive=True)


# ------------------------------------------------------------------ defect 3


def test_temporary_files_left_by_an_earlier_process_are_removed_with_the_rotation(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    url = f"file://{store}"
    first = RemoteCheckpointManager(url, tmp_path / "local", keep_last=2)
    first.save({"w": torch.zeros(3)}, step=1)
    first.close()
    leftover = store / ".ckpt-000002-step2.pt.0a1b2c3d.uploading"
    leftover.write_bytes(b"half a checkpoint")
    unrelated = store / ".notes.txt.0a1b2c3d.uploading"  # not a checkpoint's: not ours
    unrelated.write_bytes(b"x")

    manager = RemoteCheckpointManager(url, tmp_path / "local", keep_last=2)
    manager.save({"w": torch.ones(3)}, step=2)
    manager.close()
    # Before: the leftover stayed on the store for good.
    assert not leftover.exists()
    assert unrelated.exists()
    names = sorted(p.name for p in store.glob("ckpt-*.pt"))
    assert names == ["ckpt-000001-step1.pt", "ckpt-000002-step2.pt"]
    for name, step in zip(names, (1, 2), strict=True):
        assert read_checkpoint(store / name)["step"] == step


def test_the_temporary_file_of_an_upload_still_running_in_this_process_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    url = f"file://{store}"
    slow = RemoteCheckpointManager(url, tmp_path / "a", keep_last=None, timeouts=StorageTimeouts())
    release = threading.Event()
    _hang(monkeypatch, slow.storage.fs, "put_file", release)
    try:
        slow.limit_uploads(0.3)
        slow.save({"w": torch.zeros(3)}, step=1)
        with pytest.raises(CheckpointWriteError):
            slow.close()
        (running,) = store.glob(".*.uploading")  # its put is still writing

        other = RemoteCheckpointManager(url, tmp_path / "b", keep_last=None)
        other.save({"w": torch.ones(3)}, step=7)
        other.close()
        assert running.exists()
        assert [p.name for p in store.glob("ckpt-*.pt")] == ["ckpt-000001-step7.pt"]
    finally:
        release.set()


# ------------------------------------------------------------------ reading


def test_only_damaged_local_copies_and_an_empty_store_is_a_corrupt_checkpoint_error(
    tmp_path: Path,
) -> None:
    from scramjet.checkpoint import CheckpointManager, CorruptCheckpointError
    from scramjet.checkpoint.remote import load_remote

    (tmp_path / "store").mkdir()
    local = CheckpointManager(tmp_path / "local", keep_last=None)
    local.save({"w": torch.ones(3)}, step=1)
    local.close()
    (path,) = (tmp_path / "local").glob("ckpt-*.pt")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    # Before: IndexError (the error named the newest remote checkpoint, and there is none).
    with (
        pytest.warns(UserWarning, match="saved but not uploaded"),
        pytest.raises(CorruptCheckpointError, match="no readable checkpoint") as caught,
    ):
        load_remote(f"file://{tmp_path / 'store'}", {"w": torch.zeros(3)}, local_dir=path.parent)
    assert caught.value.path == path
