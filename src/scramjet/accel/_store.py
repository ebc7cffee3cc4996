"""A sample store shared by every process that opens the same directory.

Layout of a store directory (private, mode 0700, removed by the process that created it)::

    index.bin      int64 header [magic, n, mem_used, disk_used, done, hints_written, owner, 0]
                   + 8 preloader pid slots + a ring of 256 hinted indices
                   + n entries [state, segment, offset, length]
    lock           flock target for claims, budget reservations, slots and hints
    seg-<id>.bin   append-only segments, one per writing process, in RAM (/dev/shm)
    <spill dir>/seg-<id>.bin   segments on disk, used once the memory budget is full

An entry goes EMPTY -> CLAIMED (segment field = claimer pid) -> MEM or DISK (or NONE when it
could not be stored). The payload is written before the entry, and the state is stored last
in a single aligned 8-byte write, so a reader that sees MEM/DISK sees a complete sample.
``done`` counts entries in a final state (MEM, DISK, NONE): once it equals ``n`` nothing is
left to decode and readers take a lock-free path. Readers post the indices they are about to
decode into the hint ring, so background preloaders work on them (from the other end of the
batch) before they walk the rest. Payloads are pickles written by this process tree into its
own private directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import mmap
import os
import pickle
import secrets
import shutil
import tempfile
import threading
from typing import Any

import numpy as np
import torch

EMPTY, CLAIMED, MEM, DISK, NONE = 0, 1, 2, 3, 4
_MAGIC = 0x5343524A  # "SCRJ"
_ENTRY = 4
_HEADER = 8  # magic, n, mem_used, disk_used, done, hints_written, owner pid, reserved
_DONE, _HINTS_WRITTEN, _OWNER = 4, 5, 6
_SLOTS = 8  # pids of running preloaders
_HINTS = 256  # ring of hinted indices
_SLOT0 = _HEADER
_HINT0 = _HEADER + _SLOTS
_TABLE = _HEADER + _SLOTS + _HINTS  # first entry


def _rebuild_tensor(array: np.ndarray, dtype: str) -> torch.Tensor:
    t = torch.from_numpy(array)
    target = getattr(torch, dtype)
    return t if t.dtype == target else t.view(target)


class _Pickler(pickle.Pickler):
    """Stores tensors as NumPy arrays (fast, compact) and everything else as pickle does."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter:
            t = obj.detach().cpu().contiguous()
            name = str(t.dtype).split(".")[1]
            if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
                t = t.view(torch.int16 if t.element_size() == 2 else torch.uint8)
            return _rebuild_tensor, (t.numpy(), name)
        return NotImplemented


def encode(sample: Any) -> bytes:
    """Serialise one sample (tensors, arrays, scalars, strings, nested containers)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(sample)
    return buf.getvalue()


def decode(blob: bytes) -> Any:
    """Inverse of :func:`encode`."""
    return pickle.loads(blob)


def default_root() -> str:
    """Where the in-memory tier lives: /dev/shm when present (RAM), else the temp dir."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return tempfile.gettempdir()


class SharedStore:
    """Index + segments in a directory; safe across threads, forks and spawned processes."""

    def __init__(self, root: str, spill_dir: str | None, owner: bool) -> None:
        self.root, self.spill_dir, self.owner = root, spill_dir, owner
        self._pid = -1
        self._index: np.ndarray | None = None
        self._reset_process_state()

    @classmethod
    def create(cls, n: int, spill: bool, parent: str | None = None) -> SharedStore:
        root = tempfile.mkdtemp(prefix="scramjet-cache-", dir=parent or default_root())
        spill_dir = tempfile.mkdtemp(prefix="scramjet-spill-") if spill else None
        header = np.zeros(_HEADER, dtype=np.int64)
        header[:2] = (_MAGIC, n)
        header[_OWNER] = os.getpid()
        with open(os.path.join(root, "index.bin"), "wb") as f:
            f.write(header.tobytes())
            f.truncate((_TABLE + _ENTRY * n) * 8)
        open(os.path.join(root, "lock"), "wb").close()
        return cls(root, spill_dir, owner=True)

    def _reset_process_state(self) -> None:
        # Locks, fds and the writer segment belong to one process; a forked child gets fresh
        # ones (a lock held by another thread at fork time would never be released, and an
        # inherited flock fd would share the parent's lock instead of excluding it). The
        # index mapping is MAP_SHARED and stays valid in a child.
        self._pid = os.getpid()
        self._tlock = threading.Lock()
        self._lock_fd: int | None = None
        self._readers: dict[tuple[int, int], int] = {}
        self._writers: dict[int, tuple[int, int, int]] = {}

    def _check_pid(self) -> None:
        if self._pid != os.getpid():
            self._reset_process_state()

    def exists(self) -> bool:
        return os.path.exists(os.path.join(self.root, "index.bin"))

    @property
    def index(self) -> np.ndarray:
        """The whole index file as a writable int64 array (a plain ndarray over an mmap)."""
        if self._index is None:
            with open(os.path.join(self.root, "index.bin"), "r+b") as f:
                mm = mmap.mmap(f.fileno(), 0)
            self._index = np.frombuffer(mm, dtype=np.int64)
        return self._index

    @property
    def n(self) -> int:
        return int(self.index[1])

    def entry(self, i: int) -> np.ndarray:
        base = _TABLE + _ENTRY * i
        return self.index[base : base + _ENTRY]

    def state(self, i: int) -> int:
        return int(self.index[_TABLE + _ENTRY * i])

    def states(self) -> np.ndarray:
        return self.index[_TABLE:].reshape(-1, _ENTRY)[:, 0]

    def usage(self) -> tuple[int, int]:
        """(bytes in memory, bytes spilled to disk)."""
        return int(self.index[2]), int(self.index[3])

    def complete(self) -> bool:
        """True once every entry is in a final state: nothing is left to decode."""
        index = self.index
        return bool(index[_DONE] >= index[1])

    def owner_pid(self) -> int:
        return int(self.index[_OWNER])

    def _locked(self) -> _FileLock:
        self._check_pid()
        if self._lock_fd is None:
            self._lock_fd = os.open(os.path.join(self.root, "lock"), os.O_RDWR)
        return _FileLock(self._tlock, self._lock_fd)

    def try_claim(self, i: int) -> bool:
        """Claim entry ``i`` for decoding; False when it is stored or claimed by a live pid."""
        with self._locked():
            e = self.entry(i)
            if e[0] == CLAIMED and not _pid_alive(int(e[1])):
                e[0] = EMPTY
            if e[0] != EMPTY:
                return False
            e[1] = os.getpid()
            e[0] = CLAIMED
            return True

    def release(self, i: int) -> None:
        """Give a claim back without storing (the decode failed)."""
        with self._locked():
            e = self.entry(i)
            if e[0] == CLAIMED and e[1] == os.getpid():
                e[0] = EMPTY

    def put(self, i: int, blob: bytes, budget: int | None) -> int:
        """Store a claimed entry; returns the tier used (MEM, DISK or NONE)."""
        with self._locked():
            hdr = self.index
            if budget is None or hdr[2] + len(blob) <= budget:
                tier = MEM
                hdr[2] += len(blob)
            elif self.spill_dir is not None:
                tier = DISK
                hdr[3] += len(blob)
            else:
                tier = NONE
            seg, offset = (0, 0) if tier == NONE else self._reserve(tier, len(blob))
        if tier != NONE:
            os.pwrite(self._writers[tier][1], blob, offset)
        e = self.entry(i)
        e[1], e[2], e[3] = seg, offset, len(blob)
        e[0] = tier  # last: readers trust the other fields once the state says stored
        with self._locked():
            hdr[_DONE] += 1
        return tier

    def post_hints(self, indices: list[int]) -> None:
        """Ask preloaders to decode ``indices`` next (the last one first)."""
        with self._locked():
            index = self.index
            written = int(index[_HINTS_WRITTEN])
            for k, i in enumerate(reversed(indices[-_HINTS:])):
                index[_HINT0 + (written + k) % _HINTS] = i
            index[_HINTS_WRITTEN] = written + min(len(indices), _HINTS)

    def hints_since(self, seen: int) -> tuple[list[int], int]:
        """Hinted indices posted after the first ``seen`` ones, and the new count."""
        index = self.index
        written = int(index[_HINTS_WRITTEN])
        seen = max(seen, written - _HINTS)
        return [int(index[_HINT0 + k % _HINTS]) for k in range(seen, written)], written

    def reserve_preloaders(self, wanted: int) -> int:
        """Book up to ``wanted`` preloader slots minus the live ones; returns how many.

        Booked slots hold this process's pid until :meth:`set_preloader` names the child.
        """
        with self._locked():
            slots = self.index[_SLOT0 : _SLOT0 + _SLOTS]
            for k in range(_SLOTS):
                if slots[k] and not _pid_alive(int(slots[k])):
                    slots[k] = 0
            free = [k for k in range(_SLOTS) if slots[k] == 0]
            booked = max(0, min(wanted - (_SLOTS - len(free)), len(free)))
            for k in free[:booked]:
                slots[k] = os.getpid()
            return booked

    def set_preloader(self, old: int, new: int) -> None:
        """Replace the first slot holding pid ``old`` by ``new`` (0 frees it)."""
        with self._locked():
            slots = self.index[_SLOT0 : _SLOT0 + _SLOTS]
            for k in range(_SLOTS):
                if slots[k] == old:
                    slots[k] = new
                    return

    def preloaders(self) -> list[int]:
        """Pids in the preloader slots (live or not yet cleaned)."""
        return [int(p) for p in self.index[_SLOT0 : _SLOT0 + _SLOTS] if p]

    def _reserve(self, tier: int, size: int) -> tuple[int, int]:
        seg, fd, end = self._writers.get(tier, (0, -1, 0))
        if fd < 0:
            seg = secrets.randbits(62) | 1
            fd = os.open(self._seg_path(tier, seg), os.O_RDWR | os.O_CREAT, 0o600)
        self._writers[tier] = (seg, fd, end + size)
        return seg, end

    def _seg_path(self, tier: int, seg: int) -> str:
        folder = self.root if tier == MEM else self.spill_dir
        return os.path.join(str(folder), f"seg-{seg:x}.bin")

    def get(self, i: int) -> bytes | None:
        """The stored payload of entry ``i``, or None when it is not stored."""
        base = _TABLE + _ENTRY * i
        state, seg, offset, length = self.index[base : base + _ENTRY].tolist()
        if state not in (MEM, DISK):
            return None
        fd = self._readers.get((state, seg))
        if fd is None:
            fd = os.open(self._seg_path(state, seg), os.O_RDONLY)
            self._readers[(state, seg)] = fd
        return os.pread(fd, length, offset)

    def destroy(self) -> None:
        """Remove the directories (owner only)."""
        for fd in [*self._readers.values(), *(w[1] for w in self._writers.values())]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._readers.clear()
        self._writers.clear()
        for folder in (self.root, self.spill_dir):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)


class _FileLock:
    def __init__(self, tlock: threading.Lock, fd: int) -> None:
        self.tlock, self.fd = tlock, fd

    def __enter__(self) -> None:
        self.tlock.acquire()
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        self.tlock.release()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
