"""Reading remote checkpoints never waits without a bound: the listing that
``resume_from="auto"`` and ``load_remote`` make and the download of a checkpoint each get
a deadline (``StorageTimeouts.call``, plus the transfer time at ``min_rate`` for a
download). Before, a store that stopped answering (gcsfs has no timeout of its own) held
the resume forever. The store here is a real ``file://`` folder whose calls are made to
hang by replacing one method of fsspec's local file system."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fsspec.implementations.local import LocalFileSystem
from torch import nn

from scramjet.checkpoint import CheckpointError, CheckpointManager
from scramjet.checkpoint.remote import has_checkpoints, load_remote
from scramjet.tracking.storage import StorageTimeouts

pytestmark = pytest.mark.timeout(60)

FAST = StorageTimeouts(call=0.5)


@pytest.fixture()
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # the abandoned calls end with the test


def _hang(monkeypatch: pytest.MonkeyPatch, method: str, release: threading.Event) -> None:
    def hang(*args: Any, **kwargs: Any) -> None:
        release.wait(30)
        raise ConnectionError("the store stopped answering")

    monkeypatch.setattr(LocalFileSystem, method, hang)


def _store(tmp_path: Path) -> str:
    """A store holding one checkpoint, as a RemoteCheckpointManager leaves it."""
    store = tmp_path / "store"
    manager = CheckpointManager(store, keep_last=None)
    model = nn.Linear(3, 1)
    with torch.no_grad():
        model.weight.copy_(torch.arange(3.0))
    manager.save({"model": model}, step=4)
    manager.close()
    return f"file://{store}"


def test_looking_for_checkpoints_on_a_store_that_does_not_answer_ends_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    url = _store(tmp_path)
    assert has_checkpoints(url, timeouts=FAST)
    _hang(monkeypatch, "ls", release)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="listing of file://"):
        has_checkpoints(url, timeouts=FAST)
    assert time.monotonic() - start < 10  # before: until the store answered (here 30 s)


@pytest.mark.parametrize("method", ["ls", "open"])
def test_loading_from_a_store_that_does_not_answer_is_a_clear_error_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: threading.Event, method: str
) -> None:
    url = _store(tmp_path)
    _hang(monkeypatch, method, release)
    model = nn.Linear(3, 1)
    start = time.monotonic()
    with pytest.raises(CheckpointError, match=r"could not (read the checkpoints|download)"):
        load_remote(url, {"model": model}, local_dir=tmp_path / "copies", timeouts=FAST)
    assert time.monotonic() - start < 10
    assert not torch.equal(model.weight[0], torch.arange(3.0))  # nothing loaded
    assert not list((tmp_path / "copies").glob("ckpt-*.pt"))  # no partial download


def test_a_store_that_answers_loads_as_before(tmp_path: Path) -> None:
    url = _store(tmp_path)
    model = nn.Linear(3, 1)
    result = load_remote(url, {"model": model}, local_dir=tmp_path / "copies", timeouts=FAST)
    assert result.step == 4
    assert torch.equal(model.weight[0], torch.arange(3.0))
