"""A sample store shared by every process that opens the same directory.

Layout of a store directory (private, mode 0700, removed by the process that created it)::

    index.bin      int64 header [magic, n, mem_used, disk_used, done, hints_written, owner,
                   mem_capacity, flags, 0] + 8 preloader pid slots + a ring of 256 hinted
                   indices + n entries [state, segment, offset, length]
    lock           flock target for claims, budget reservations, slots and hints
    seg-<id>.bin   append-only segments, one per writing process, in RAM (/dev/shm)
    <spill dir>/seg-<id>.bin   segments on disk, used once the memory tier is full

An entry goes EMPTY -> CLAIMED (segment field = claimer pid) -> MEM or DISK (or NONE when it
could not be stored). The payload is written before the entry, and the state is stored last
in a single aligned 8-byte write, so a reader that sees MEM/DISK sees a complete sample.
``done`` counts entries in a final state (MEM, DISK, NONE): once it equals ``n`` nothing is
left to decode and readers take a lock-free path. Readers post the indices they are about to
decode into the hint ring, so background preloaders work on them (from the other end of the
batch) before they walk the rest. Payloads are pickles written by this process tree into its
own private directory.

Space. The index (32 bytes per sample) counts against the memory budget: when it does not
fit, or the RAM folder lacks room for it, it goes to the temporary folder on disk and the
memory tier stays empty. Blocks are allocated (``posix_fallocate``) before they are written,
so a full folder is an ``ENOSPC`` error at the writer, never a SIGBUS in a process touching a
mapped page, and a sample is published only once all its bytes are written. A tier also stops
growing when its folder's free space would fall below a reserve (:func:`reserve_bytes`):
DataLoader workers pass every batch through ``/dev/shm``, and a cache that filled it would
crash them. A tier that runs out of room is closed for every process (one flag in the
header); later samples go to the next tier (disk, then uncached), with one warning.
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
import warnings
from typing import Any

import numpy as np
import torch

from scramjet.accel import _janitor
from scramjet.runtime.processes import pid_alive
from scramjet.runtime.stacklevel import user_stacklevel

EMPTY, CLAIMED, MEM, DISK, NONE = 0, 1, 2, 3, 4
_MAGIC = 0x5343524A  # "SCRJ"
_ENTRY = 4
_HEADER = 10  # magic, n, mem_used, disk_used, done, hints_written, owner, capacity, flags, 0
_MEM_USED, _DISK_USED, _DONE, _HINTS_WRITTEN, _OWNER, _CAPACITY, _FLAGS = 2, 3, 4, 5, 6, 7, 8
_MEM_CLOSED, _DISK_CLOSED = 1, 2  # flags: a tier ran out of room
_REMOVED = 4  # flag: the creator deleted the store; other processes let go of their files
_SLOTS = 8  # pids of running preloaders
_HINTS = 256  # ring of hinted indices
_SLOT0 = _HEADER
_HINT0 = _HEADER + _SLOTS
_TABLE = _HEADER + _SLOTS + _HINTS  # first entry


_NO_LIMIT = np.iinfo(np.int64).max
_GIB = 1 << 30


class CacheWarning(UserWarning):
    """The dataset cache cannot work as asked: random samples, or a folder without room."""


def index_bytes(n: int) -> int:
    """Size of the index file of a store of ``n`` samples."""
    return (_TABLE + _ENTRY * n) * 8


def reserve_bytes(total: int, in_ram: bool) -> int:
    """Free space a tier leaves in its folder of ``total`` bytes.

    RAM folder: half of it, at most 1 GiB (DataLoader workers pass batches through it).
    Disk: 5 %, at most 1 GiB (checkpoints and logs are written there too).
    """
    return min(total // 2 if in_ram else total // 20, _GIB)


def _space(folder: str) -> tuple[int, int]:
    """(free bytes for this user, total bytes) of the filesystem holding ``folder``."""
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def _allocate(fd: int, offset: int, size: int) -> None:
    """Give bytes [offset, offset + size) real blocks now: ENOSPC here, not SIGBUS later."""
    if size > 0 and hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, offset, size)


def _write_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(f"wrote {written} bytes")
        view, offset = view[written:], offset + written


def _rebuild_tensor(
    array: np.ndarray,
    dtype: str,
    device: str = "cpu",
    order: tuple[int, ...] | None = None,
    parameter: bool | None = None,
    requires_grad: bool = False,
    strides: tuple[int, ...] | None = None,
    shape: tuple[int, ...] | None = None,
) -> torch.Tensor:
    """Inverse of ``_Pickler.reducer_override``: ``parameter`` is an ``nn.Parameter``'s
    ``requires_grad`` (None: a plain tensor, which ``requires_grad`` marks as a leaf that
    requires grad, as the dataset returned it). ``strides`` are those of a view with gaps
    (``x[:, ::2]``), ``shape`` that of an expanded one (``x.expand(...)``, stride 0)."""
    t = torch.from_numpy(array)
    target = getattr(torch, dtype)
    t = t if t.dtype == target else t.view(target)
    if order is not None:  # the memory layout it was returned in (channels_last, permuted)
        t = t.permute([order.index(d) for d in range(t.dim())])
    if strides is not None:
        t = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=device).copy_(t)
    t = t if device == "cpu" else t.to(device)  # on the device the dataset returned it
    t = t if shape is None else t.expand(shape)
    if parameter is not None:
        return torch.nn.Parameter(t, requires_grad=parameter)
    return t.requires_grad_() if requires_grad else t


def _memory_order(t: torch.Tensor) -> tuple[int, ...] | None:
    """The dims of a dense tensor from the outermost in memory to the innermost (None:
    already in order, or not dense), so that its layout can be rebuilt."""
    strides = t.stride()
    order = tuple(sorted(range(t.dim()), key=lambda d: -strides[d]))
    if order == tuple(range(t.dim())) or not t.permute(order).is_contiguous():
        return None
    return order


def _unexpanded(t: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...] | None]:
    """``t`` with each expanded dim (stride 0, size > 1) cut to size 1, and the shape to
    expand it back to (None: nothing was expanded): the cache stores the values once."""
    cut = [t.stride(d) == 0 and t.size(d) > 1 for d in range(t.dim())]
    if not any(cut):
        return t, None
    index = tuple(slice(0, 1) if c else slice(None) for c in cut)
    return t[index], tuple(t.shape)


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class _Pickler(pickle.Pickler):
    """Stores dense tensors as NumPy arrays (fast, compact) and everything else as pickle does."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is not torch.Tensor and type(obj) is not torch.nn.Parameter:
            return NotImplemented
        if obj.layout != torch.strided or obj.is_nested or obj.is_quantized:
            return NotImplemented  # sparse, nested, quantized: torch's own pickling
        t = obj.detach().cpu().resolve_conj().resolve_neg()
        t, shape = _unexpanded(t)
        order = _memory_order(t)
        strides = None if order is not None or t.is_contiguous() else t.stride()
        t = (t if order is None else t.permute(order)).contiguous()
        name = str(t.dtype).split(".")[1]
        try:
            array = t.numpy()
        except (TypeError, RuntimeError):  # no NumPy dtype (bf16, float8, ...): its bits
            as_int = _SAME_SIZE_INT.get(t.element_size())
            if as_int is None:
                return NotImplemented
            array = t.view(as_int).numpy()
        parameter = obj.requires_grad if type(obj) is torch.nn.Parameter else None
        grad = parameter is None and obj.requires_grad
        layout = (order, strides, shape)
        if obj.device.type == "cpu" and layout == (None,) * 3 and parameter is None and not grad:
            return _rebuild_tensor, (array, name)
        args = (array, name, str(obj.device), order, parameter, grad, strides, shape)
        return _rebuild_tensor, args


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
    def create(
        cls, n: int, spill: bool, parent: str | None = None, budget: int | None = None
    ) -> SharedStore | None:
        """A new store for ``n`` samples, or None (with a warning) when no folder has room.

        The index goes to the RAM folder ``parent`` (default :func:`default_root`) when it
        fits within ``budget`` and the folder's free space above its reserve; otherwise to the
        temporary folder on disk, with an empty memory tier. ``budget`` (bytes, None = no
        limit) covers the index and the in-memory samples.
        """
        size = index_bytes(n)
        ram = parent or default_root()
        disk = tempfile.gettempdir()
        places: list[tuple[str, bool]] = []
        if budget is None or size <= budget:
            places.append((ram, True))
        elif budget > 0:
            header = index_bytes(0)
            _warn(
                f"max_memory_size={budget} bytes cannot hold the cache index ({size} bytes: "
                f"{_ENTRY * 8} bytes for each of {n} samples plus a {header}-byte header); the "
                f"index is kept on disk in {disk} and "
                + ("samples spill there." if spill else "samples are not cached.")
                + f" To cache in RAM, pass max_memory_size of at least {size} bytes plus the "
                "bytes of the samples to keep there."
            )
        if not places or os.path.realpath(disk) != os.path.realpath(ram):
            places.append((disk, False))
        problems = []
        for folder, in_ram in places:
            try:
                root = _new_index(folder, n, size, in_ram)
            except OSError as exc:
                problems.append(f"{folder}: {exc.strerror or exc}")
                continue
            capacity = 0
            if in_ram:
                capacity = _NO_LIMIT if budget is None else budget - size
            store = cls(root, None, owner=True)
            store.index[_CAPACITY] = capacity
            if spill:
                store.spill_dir = tempfile.mkdtemp(prefix="scramjet-spill-")
            for path in (store.root, store.spill_dir):
                if path:
                    _janitor.watch(path)
            if problems:
                _warn(
                    f"the dataset cache index ({_mib(size)}) does not fit in "
                    f"{'; '.join(problems)}; it is kept in {folder} instead"
                    + ("" if in_ram else ", with no samples in RAM")
                    + ". Give the RAM folder more room (e.g. docker run --shm-size=8g) or "
                    "pass cache_dir= a folder with space."
                )
            return store
        _warn(
            f"no folder has room for the dataset cache index ({_mib(size)} for {n} samples): "
            f"{'; '.join(problems)}. The dataset is served uncached. Free some space or pass "
            "cache_dir= a folder with room."
        )
        return None

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
        """(bytes of samples in memory, bytes spilled to disk)."""
        return int(self.index[_MEM_USED]), int(self.index[_DISK_USED])

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
            if e[0] == CLAIMED and not pid_alive(int(e[1])):
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

    def skip(self, i: int) -> None:
        """Mark claimed entry ``i`` as not cached (its sample cannot be stored)."""
        with self._locked():
            e = self.entry(i)
            if e[0] == CLAIMED and e[1] == os.getpid():
                e[0] = NONE
                self.index[_DONE] += 1

    def put(self, i: int, blob: bytes) -> int:
        """Store a claimed entry; returns the tier used (MEM, DISK or NONE).

        The bytes are allocated and written in full before the entry says where they are; a
        tier that fails (no room, an I/O error) is closed and the next one is tried.
        """
        tier, seg, offset = self._book(len(blob))
        while tier != NONE:
            try:
                fd = self._writers[tier][1]
                _allocate(fd, offset, len(blob))
                _write_all(fd, blob, offset)
                break
            except OSError as exc:
                tier, seg, offset = self._book(len(blob), failed=(tier, exc))
        e = self.entry(i)
        with self._locked():  # try_claim reads a CLAIMED entry's pid from e[1] under it
            e[1], e[2], e[3] = seg, offset, len(blob)
            e[0] = tier  # last: lock-free readers trust the fields once the state says stored
            self.index[_DONE] += 1
        return tier

    def _book(self, size: int, failed: tuple[int, OSError] | None = None) -> tuple[int, int, int]:
        """Pick the tier for ``size`` bytes and reserve them: (tier, segment, offset).

        ``failed``: the tier just tried could not take the bytes booked on it; they are given
        back and the tier is closed.
        """
        with self._locked():
            hdr = self.index
            if failed is not None:
                tier, exc = failed
                hdr[_MEM_USED if tier == MEM else _DISK_USED] -= size
                self._close(tier, f"writing {size} bytes failed ({exc})")
            if not int(hdr[_FLAGS]) & _MEM_CLOSED and hdr[_MEM_USED] + size <= hdr[_CAPACITY]:
                booked = self._try_book(MEM, self.root, size)
                if booked is not None:
                    return booked
            spill = self.spill_dir
            if spill is not None and not int(hdr[_FLAGS]) & _DISK_CLOSED:
                booked = self._try_book(DISK, spill, size)
                if booked is not None:
                    return booked
            return NONE, 0, 0

    def _try_book(self, tier: int, folder: str, size: int) -> tuple[int, int, int] | None:
        """Reserve ``size`` bytes on ``tier`` (lock held), or None once it is closed: no room
        left, or its folder was removed under the cache (a temporary-file cleaner)."""
        try:
            if not self._has_room(folder, size, in_ram=tier == MEM):
                return None
            seg, offset = self._reserve(tier, size)
        except OSError as exc:
            self._close(tier, str(exc), full=False)
            return None
        self.index[_MEM_USED if tier == MEM else _DISK_USED] += size
        return tier, seg, offset

    def _has_room(self, folder: str, size: int, in_ram: bool) -> bool:
        """Whether ``size`` more bytes leave the folder's reserve free; closes the tier if not
        (lock held)."""
        free, total = _space(folder)
        keep = reserve_bytes(total, in_ram)
        if free - size >= keep:
            return True
        self._close(
            MEM if in_ram else DISK,
            f"{os.path.dirname(folder)} has {_mib(free)} free of {_mib(total)} and the cache leaves "
            f"{_mib(keep)} free there"
            + (" for DataLoader workers, which pass batches through it" if in_ram else ""),
        )
        return False

    def _close(self, tier: int, why: str, full: bool = True) -> None:
        """Close ``tier`` for every process; the first process to close it warns (lock held).
        ``full``: it ran out of room (else its folder cannot be written: removed, read-only)."""
        bit = _MEM_CLOSED if tier == MEM else _DISK_CLOSED
        flags = int(self.index[_FLAGS])
        if flags & bit:
            return
        self.index[_FLAGS] = flags | bit
        if flags & _REMOVED:  # released by its owner (a preloader was still writing): no fault
            return
        if tier == MEM and self.spill_dir is not None and not flags & _DISK_CLOSED:
            then = f"later samples spill to disk in {self.spill_dir}"
        else:
            then = "later samples are not cached (they are loaded by the dataset each time)"
        fix = (
            "keep its folder while the cache is in use (a temporary-file cleaner such as "
            "systemd-tmpfiles may have removed it: exclude scramjet-* folders from it), or pass "
            "cache_dir= / set TMPDIR to a folder nothing removes"
            if not full
            else "give the container more shared memory (e.g. docker run --shm-size=8g), lower "
            "max_memory_size, or pass cache_dir= a RAM folder with room"
            if tier == MEM
            else "free disk space or set TMPDIR to a folder with room"
        )
        tier_name = "memory" if tier == MEM else "disk"
        state = "is full" if full else "cannot be written"
        _warn(f"the dataset cache's {tier_name} tier {state}: {why}; {then}. To cache more, {fix}.")

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
                if slots[k] and not pid_alive(int(slots[k])):
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
        """The stored payload of entry ``i``; None when it is not stored (then, or now: an
        entry whose bytes cannot be read back is marked NONE, and its sample is loaded)."""
        base = _TABLE + _ENTRY * i
        state, seg, offset, length = self.index[base : base + _ENTRY].tolist()
        if state not in (MEM, DISK):
            return None
        try:
            fd = self._readers.get((state, seg))
            if fd is None:
                fd = os.open(self._seg_path(state, seg), os.O_RDONLY)
                self._readers[(state, seg)] = fd
            blob = os.pread(fd, length, offset)
        except OSError:
            blob = b""
        if len(blob) == length:
            return blob
        with self._locked():
            e = self.entry(i)
            if e[0] == state:
                e[0] = NONE
        return None

    def removed(self) -> bool:
        """Whether the creating process deleted this store (see :meth:`destroy`)."""
        if self._index is None and not self.exists():
            return True
        return bool(self.index[_FLAGS] & _REMOVED)

    def detach(self) -> None:
        """Close this process's files of a removed store (their memory is then freed)."""
        for fd in [*self._readers.values(), *(w[1] for w in self._writers.values())]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._readers.clear()
        self._writers.clear()

    def destroy(self) -> None:
        """Remove the directories (owner only).

        Other processes (persistent DataLoader workers) may still hold the segment files
        open, which would keep their memory until they exit: the segments are emptied first,
        which frees it at once, and a flag in the index tells those processes to read the
        dataset uncached from then on.
        """
        with contextlib.suppress(OSError, ValueError):
            self.index[_FLAGS] |= _REMOVED
        self.detach()
        for folder in (self.root, self.spill_dir):
            if not folder:
                continue
            with contextlib.suppress(OSError):
                for name in os.listdir(folder):
                    if name.startswith("seg-"):
                        with contextlib.suppress(OSError):
                            os.truncate(os.path.join(folder, name), 0)
            shutil.rmtree(folder, ignore_errors=True)
            _janitor.forget(folder)


def _new_index(folder: str, n: int, size: int, in_ram: bool) -> str:
    """A new store folder in ``folder`` with its index allocated; its path.

    Raises OSError (ENOSPC) when the folder cannot hold the index and keep its reserve.
    """
    free, total = _space(folder)
    if free - size < reserve_bytes(total, in_ram):
        raise OSError(
            f"{_mib(free)} free of {_mib(total)}, the cache leaves "
            f"{_mib(reserve_bytes(total, in_ram))} free"
        )
    root = tempfile.mkdtemp(prefix="scramjet-cache-", dir=folder)
    try:
        header = np.zeros(_HEADER, dtype=np.int64)
        header[:2] = (_MAGIC, n)
        header[_OWNER] = os.getpid()
        fd = os.open(os.path.join(root, "index.bin"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _allocate(fd, 0, size)
            os.ftruncate(fd, size)
            _write_all(fd, header.tobytes(), 0)
        finally:
            os.close(fd)
        open(os.path.join(root, "lock"), "wb").close()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root


def _warn(message: str) -> None:
    warnings.warn(message, CacheWarning, stacklevel=user_stacklevel())


class _FileLock:
    def __init__(self, tlock: threading.Lock, fd: int) -> None:
        self.tlock, self.fd = tlock, fd

    def __enter__(self) -> None:
        self.tlock.acquire()
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        self.tlock.release()
