"""The shard cache's locks with several reading threads in one process, and across a
fork taken while one is held (a DataLoader worker started by one reader thread while
another holds the cache's lock). Three reader threads with process loaders over one
shared cache used to hang on these, now and then."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from packdata_helpers import raw_pack_of_images

from scramjet.data._cache_readers import _registered, register_reader
from scramjet.data._remote import Retry, ShardCache, _hold_owner, _Locked, _owners, read_manifest

fork = multiprocessing.get_context("fork")


def _try_lock(path: Path) -> bool:
    try:
        _Locked(path, exclusive=True, wait=False).close()
    except BlockingIOError:
        return False
    return True


def _child_takes_the_lock(path: str, done: multiprocessing.synchronize.Event) -> None:
    # the worker's own first use of the cache: with the parent's lock released, it gets it
    os._exit(0 if _try_lock(Path(path)) else 3) if done.wait(30) else os._exit(4)


def test_a_lock_released_by_its_taker_is_free_though_a_forked_child_holds_a_copy(
    tmp_path: Path,
) -> None:
    path = tmp_path / ".lock"
    done = fork.Event()
    with _Locked(path, exclusive=True, create=True):
        child = fork.Process(target=_child_takes_the_lock, args=(str(path), done))
        child.start()  # forked while the lock is held: it inherits the descriptor
    try:
        assert _try_lock(path), "the lock stayed held by the forked child's copy"
        done.set()
        child.join(30)
        assert child.exitcode == 0, f"the child could not take the released lock ({child.exitcode})"
    finally:
        if child.is_alive():
            child.kill()


def _child_closes_its_copy(lock: _Locked, path: str) -> None:
    lock.close()  # an inherited hold dropped in the child (a dataset copy's cancelled read)
    os._exit(0 if not _try_lock(Path(path)) else 5)


def test_a_child_closing_its_inherited_copy_leaves_the_parents_lock_held(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shard.lock"
    lock = _Locked(path, exclusive=True, create=True)
    try:
        child = fork.Process(target=_child_closes_its_copy, args=(lock, str(path)))
        child.start()
        child.join(30)
        assert child.exitcode == 0, "the child's close released the parent's lock"
        assert not _try_lock(path)
    finally:
        lock.close()
    assert _try_lock(path)


@pytest.mark.parametrize("exclusive", [True, False])
def test_a_lock_that_cannot_be_taken_closes_its_file(tmp_path: Path, exclusive: bool) -> None:
    path = tmp_path / "held"
    holder = _Locked(path, exclusive=True, create=True)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(BlockingIOError):
        _Locked(path, exclusive=exclusive, wait=False)
    assert len(os.listdir("/proc/self/fd")) == before
    holder.close()


def _waiters(path: Path) -> int:
    """Processes or threads waiting for an ``flock`` on ``path`` (``/proc/locks``)."""
    inode = os.stat(path).st_ino
    with open("/proc/locks", encoding="ascii") as locks:
        return sum("->" in line and f":{inode} " in line for line in locks)


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_threads_making_the_cache_owner_at_once_all_go_on(tmp_path: Path) -> None:
    root, key = tmp_path / "cache", (os.getpid(), str(tmp_path / "cache"))
    root.mkdir()
    gate = _Locked(root / ".lock", exclusive=True, create=True)
    threads = [threading.Thread(target=_hold_owner, args=(root,), daemon=True) for _ in "ab"]
    for thread in threads:
        thread.start()
    # both found no owner yet and wait for the cache's lock
    _until(lambda: _waiters(root / ".lock") == 2, "the threads never reached the lock")
    gate.close()
    try:
        for thread in threads:
            thread.join(10)
        assert not [t for t in threads if t.is_alive()], "a thread waits on its own owner file"
    finally:
        while key in _owners:  # let a stuck thread go
            _owners.pop(key).close()
            time.sleep(0.2)


def _register(cache: ShardCache) -> None:
    register_reader(cache, keep=2)
    os._exit(0 if (cache.root / ".readers" / f"{os.getpid()}.reader").exists() else 6)


def test_a_worker_forked_while_a_thread_registers_registers_too(tmp_path: Path) -> None:
    url = raw_pack_of_images(tmp_path, f"file://{tmp_path / 'store' / 'p.pack'}", 8, shards=2)
    manifest = read_manifest(url, None, Retry())
    cache = ShardCache(url, manifest, tmp_path / "cache", cache_limit=10**9)
    gate = _Locked(cache.root / ".lock", exclusive=True, create=True)
    thread = threading.Thread(target=register_reader, args=(cache, 2), daemon=True)
    thread.start()  # this process's reader: it waits for the cache's lock
    _until(lambda: _waiters(cache.root / ".lock") == 1, "the thread never reached the lock")
    worker = fork.Process(target=_register, args=(cache,))
    worker.start()  # forked while that thread is inside register_reader
    gate.close()
    try:
        worker.join(20)
        thread.join(20)
        assert worker.exitcode == 0, f"the forked worker never registered ({worker.exitcode})"
        assert not thread.is_alive()
    finally:
        if worker.is_alive():
            worker.kill()
        mine = _registered.pop((os.getpid(), str(cache.root)), None)
        if mine is not None:
            mine.close()


def _open_a_filesystem(url: str) -> None:
    from scramjet.data._remote_fs import _filesystem

    _filesystem(url, None)
    os._exit(0)


def test_a_worker_forked_while_a_filesystem_is_being_made_makes_its_own(tmp_path: Path) -> None:
    from scramjet.data import _remote_fs

    with _remote_fs._FS_LOCK:  # another reading thread is making this process's filesystem
        worker = fork.Process(target=_open_a_filesystem, args=(f"file://{tmp_path}",))
        worker.start()
        try:
            worker.join(20)
            assert worker.exitcode == 0, "the forked worker waits on a lock nobody will release"
        finally:
            if worker.is_alive():
                worker.kill()
