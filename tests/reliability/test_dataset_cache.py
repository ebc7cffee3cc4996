"""The dataset cache when its folders fill up, when writes fail, and when its owner is killed.

A probe found that with the default budget and a container's small ``/dev/shm`` the cache
filled the RAM folder (ENOSPC, then SIGBUS, and DataLoader workers could no longer pass
batches), published truncated entries (``UnpicklingError`` in workers), kept its index
(32 bytes per sample) outside the budget, and left its RAM segment and spill folder behind
every time its process was killed (5 of 5).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import scramjet.accel._store as store_module
from scramjet.accel import CachedDataset, CacheWarning
from scramjet.accel._store import DISK, MEM, NONE, SharedStore, index_bytes


class Ramp(Dataset[torch.Tensor]):
    """Sample ``i`` is ``size`` floats equal to ``i``: any mix-up or truncation shows."""

    def __init__(self, n: int, size: int = 1000) -> None:
        self.n, self.size = n, size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((self.size,), float(i))


def _store(ds: Any) -> SharedStore:
    store = ds._scramjet_cache.store
    assert store is not None
    return store


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))


# -- the index counts against the budget ------------------------------------------------


def test_the_ram_folder_holds_at_most_max_memory_size_bytes_index_included() -> None:
    n, budget = 2000, 200_000  # index 64 kB + samples of about 4 kB each
    ds = CachedDataset(Ramp(n), max_memory_size=budget)
    try:
        for i in range(n):
            assert float(ds[i][0]) == i
        store = _store(ds)
        used = _folder_bytes(store.root)
        stats = ds.cache_stats()
        print(f"\nRAM folder: {used} bytes for a budget of {budget}; {stats}")
        assert used <= budget
        assert stats["in_memory"] > 0 and stats["on_disk"] == n - stats["in_memory"]
        assert stats["memory_bytes"] + index_bytes(n) <= budget
    finally:
        ds.close_cache()


def test_an_index_larger_than_the_budget_goes_to_disk_with_one_warning() -> None:
    # 2 M samples: a 64 MB index, which used to sit in /dev/shm whatever the budget.
    n = 2_000_000
    with pytest.warns(CacheWarning, match=r"cannot hold the cache index .*on disk") as seen:
        ds = CachedDataset(Ramp(n, size=4), max_memory_size=1 << 20, probe=False)
    try:
        assert len(seen) == 1
        store = _store(ds)
        assert Path(store.root).parent == Path(tempfile.gettempdir())
        for i in (0, 17, n - 1):
            assert float(ds[i][0]) == i
        stats = ds.cache_stats()
        assert stats["in_memory"] == 0 and stats["memory_bytes"] == 0 and stats["on_disk"] == 3
    finally:
        ds.close_cache()


# -- a write that fails is never published ----------------------------------------------


def test_a_failed_write_in_ram_closes_the_tier_and_the_sample_spills_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_write = store_module._write_all
    calls = {"mem": 0}

    def write(fd: int, data: Any, offset: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if "scramjet-cache-" in path and "seg-" in path:
            calls["mem"] += 1
            if calls["mem"] == 3:  # half the bytes land, then the folder is full
                real_write(fd, bytes(data)[: len(data) // 2], offset)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(fd, data, offset)

    monkeypatch.setattr(store_module, "_write_all", write)
    ds = CachedDataset(Ramp(10), probe=False)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            values = [float(ds[i][0]) for i in range(10)]
        assert values == [float(i) for i in range(10)]
        messages = [str(w.message) for w in seen if issubclass(w.category, CacheWarning)]
        assert len(messages) == 1 and "memory tier is full" in messages[0]
        assert "No space left on device" in messages[0] and "spill to disk" in messages[0]
        states = _store(ds).states().tolist()
        assert states == [MEM, MEM] + [DISK] * 8
        # read back from the cache, not from the dataset: every entry is whole
        for i in range(10):
            assert torch.equal(ds[i], torch.full((1000,), float(i)))
    finally:
        ds.close_cache()


def test_without_spill_a_failed_write_leaves_the_sample_uncached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def allocate(fd: int, offset: int, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    ds = CachedDataset(Ramp(6), spill=False, probe=False)
    monkeypatch.setattr(store_module, "_allocate", allocate)
    try:
        with pytest.warns(CacheWarning, match="not cached"):
            values = [float(ds[i][0]) for i in range(6)]
        assert values == [float(i) for i in range(6)]
        assert _store(ds).states().tolist() == [NONE] * 6
    finally:
        ds.close_cache()


def test_an_entry_whose_bytes_are_gone_is_loaded_again_not_unpickled() -> None:
    ds = CachedDataset(Ramp(4), probe=False)
    try:
        for i in range(4):
            ds[i]
        store = _store(ds)
        for name in os.listdir(store.root):
            if name.startswith("seg-"):
                os.truncate(os.path.join(store.root, name), 100)
        for i in range(4):
            assert torch.equal(ds[i], torch.full((1000,), float(i)))
        assert store.states().tolist() == [NONE] * 4
    finally:
        ds.close_cache()


def test_no_folder_with_room_serves_the_dataset_uncached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_space", lambda folder: (0, 1 << 30))
    with pytest.warns(CacheWarning, match="served uncached"):
        ds = CachedDataset(Ramp(5), probe=False, preloaded_data=1)
    assert [float(ds[i][0]) for i in range(5)] == [float(i) for i in range(5)]
    loader = DataLoader(ds, batch_size=2, num_workers=0)
    assert torch.cat(list(loader))[:, 0].tolist() == [float(i) for i in range(5)]
    assert ds.cache_stats() == {
        "samples": 5,
        "in_memory": 0,
        "on_disk": 0,
        "memory_bytes": 0,
        "disk_bytes": 0,
    }
    ds.close_cache()


# -- a full RAM folder: a real 20 MB tmpfs over /dev/shm ---------------------------------

_FULL_SHM_SCRIPT = """
import sys, warnings
import torch
from torch.utils.data import DataLoader, Dataset
from scramjet.accel import CachedDataset

class Big(Dataset):
    def __len__(self):
        return 400

    def __getitem__(self, i):
        return torch.full((25_000,), float(i))  # 100 kB each: 40 MB in all

spill = sys.argv[1] == "spill"
ds = CachedDataset(Big(), preloaded_data=1, spill=spill)
loader = DataLoader(ds, batch_size=16, num_workers=2, persistent_workers=True)
expected = sum(range(400)) * 25_000.0
for epoch in range(2):
    total = sum(float(batch.sum()) for batch in loader)
    assert total == expected, (epoch, total, expected)
print("stats", ds.cache_stats(), flush=True)
print("spill_dir", ds._scramjet_cache.store.spill_dir, flush=True)
"""


def _mount_prefix() -> list[str]:
    """A command prefix that runs in a private mount namespace where tmpfs can be mounted."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux unshare to mount a private tmpfs over /dev/shm")
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):
        probe = subprocess.run(
            [*prefix, "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
            capture_output=True,
        )
        if probe.returncode == 0:
            return prefix
    pytest.skip("cannot mount a private tmpfs here (needs root or user namespaces)")


@pytest.mark.parametrize("spill", ["spill", "no-spill"])
def test_a_full_20_mb_ram_folder_never_crashes_workers(tmp_path: Path, spill: str) -> None:
    script = tmp_path / "full_shm.py"
    script.write_text(textwrap.dedent(_FULL_SHM_SCRIPT))
    shell = (
        "mount -t tmpfs -o size=20m tmpfs /dev/shm && "
        f"{sys.executable} {script} {spill}; code=$?; echo left: $(ls -A /dev/shm); exit $code"
    )
    done = subprocess.run(
        [*_mount_prefix(), "sh", "-c", shell], capture_output=True, text=True, timeout=240
    )
    out, err = done.stdout, done.stderr
    print(f"\n20 MB /dev/shm, {spill}: exit {done.returncode}\n{out}")
    assert done.returncode == 0, err[-3000:]
    assert "Bus error" not in err and "UnpicklingError" not in err
    assert err.count("memory tier is full") == 1, err[-3000:]
    stats = eval(out.split("stats ", 1)[1].splitlines()[0])
    assert stats["in_memory"] > 0
    assert stats["on_disk"] == (400 - stats["in_memory"] if spill == "spill" else 0)
    assert out.strip().endswith("left:")  # the cache's RAM segment was removed at exit
    spill_dir = out.split("spill_dir ", 1)[1].split()[0]
    assert spill_dir == "None" or not os.path.exists(spill_dir)


# -- the owner killed: its folders go with it -------------------------------------------

_OWNER_SCRIPT = """
import sys, time
import torch
from torch.utils.data import Dataset
from scramjet.accel import CachedDataset

class Slow(Dataset):
    def __len__(self):
        return 400

    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.full((1000,), float(i))

ds = CachedDataset(Slow(), max_memory_size=200_000, preloaded_data=2, probe=False)
for i in range(60):
    ds[i]
store = ds._scramjet_cache.store
print(store.root, store.spill_dir, " ".join(map(str, store.preloaders())), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _kill_owner_and_wait(script: Path) -> tuple[float, list[str], list[int]]:
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        root, spill, *preloaders = owner.stdout.readline().split()  # type: ignore[union-attr]
        assert os.path.isdir(root) and os.path.isdir(spill)
        assert os.listdir(spill), "the test needs samples spilled to disk"
        killed = time.perf_counter()
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        pids = [int(p) for p in preloaders]
        while time.perf_counter() - killed < 10:
            left = [p for p in (root, spill) if os.path.exists(p)]
            alive = [p for p in pids if _alive(p)]
            if not left and not alive:
                break
            time.sleep(0.02)
        return time.perf_counter() - killed, left, alive
    finally:
        if owner.poll() is None:
            owner.kill()


def _kills(tmp_path: Path, count: int) -> None:
    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(_OWNER_SCRIPT))
    leaks, times = 0, []
    for _ in range(count):
        seconds, left, alive = _kill_owner_and_wait(script)
        times.append(seconds)
        leaks += bool(left or alive)
        assert not left, f"left behind after kill -9 of the owner: {left}"
        assert not alive, f"preloaders still running after kill -9 of the owner: {alive}"
    print(
        f"\nkill -9 of a cache owner: {leaks} of {count} left files or processes; removed "
        f"within {max(times):.2f} s"
    )


def test_a_killed_owner_leaves_no_segment_spill_folder_or_preloader(tmp_path: Path) -> None:
    _kills(tmp_path, 2)


@pytest.mark.slow
def test_twenty_kills_of_a_cache_owner_leave_nothing(tmp_path: Path) -> None:
    _kills(tmp_path, 20)
