"""Snapshots and the background writer behind ``CheckpointManager(async_write=True)``.

A save must capture the state as it is when ``save()`` is called: the training loop
changes the weights as soon as it returns. :class:`Snapshotter` copies every tensor of
a checkpoint payload into host buffers (one copy per storage, so views and tied weights
stay shared in the file as ``torch.save`` would write them) and keeps those buffers
for the next save: copying into memory that is already mapped costs a plain memcpy,
several times less than ``torch.save`` itself (see docs/bench/checkpoint.md). Tensors it
cannot copy that way (sparse, quantized, nested, tensor subclasses such as DTensor)
make the whole payload be serialised into memory instead, which is always exact.

:class:`BackgroundWriter` runs one job at a time on a fresh non-daemon thread: the
interpreter waits for a write in flight before it exits, and an error is kept until
someone asks for it (the next call of the manager, ``wait()``, ``close()``, or the exit
hook, which prints it).
"""

from __future__ import annotations

import atexit
import io
import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["BackgroundWriter", "Snapshot", "Snapshotter", "register_for_exit"]


class _CannotCopy(Exception):
    """A tensor that the storage copy does not handle (the payload is serialised instead)."""


class Snapshot:
    """A payload detached from the live objects: tensors copied, or the whole file bytes.

    Attributes:
        payload: The payload with every tensor replaced by a copy (None when ``data`` is set).
        data: The serialised file, when the payload held a tensor that cannot be copied.
        buffers: Host buffers holding the copies (handed back to the pool once written).
    """

    def __init__(
        self, payload: Any, data: bytes | None, buffers: list[torch.UntypedStorage]
    ) -> None:
        self.payload = payload
        self.data = data
        self.buffers = buffers

    def write_to(self, file: Any) -> None:
        """Write the checkpoint file contents to a binary file-like object."""
        if self.data is not None:
            file.write(self.data)
        else:
            torch.save(self.payload, file)


class Snapshotter:
    """Copies payload tensors into reusable host buffers.

    The buffers of the last written snapshot are kept (``keep`` them with
    :meth:`give_back`) and reused by the next snapshot when their sizes match, so steady
    training pays neither allocation nor page faults. :meth:`release` frees them.
    """

    def __init__(self) -> None:
        self._pool: dict[int, list[torch.UntypedStorage]] = {}
        self._lock = threading.Lock()

    def take(self, payload: Any) -> Snapshot:
        """A snapshot of ``payload``; the live tensors may change as soon as it returns."""
        with self._lock:
            pool, self._pool = self._pool, {}
        memo: dict[tuple[str, int, int], torch.UntypedStorage] = {}
        buffers: list[torch.UntypedStorage] = []
        devices: set[torch.device] = set()
        try:
            copied = _walk(payload, lambda t: _copy_tensor(t, memo, pool, buffers, devices))
        except _CannotCopy:
            data = io.BytesIO()
            torch.save(payload, data)
            self.give_back([*buffers, *(b for bs in pool.values() for b in bs)])
            return Snapshot(None, data.getvalue(), [])
        for device in devices:  # device-to-host copies were queued without waiting
            torch.cuda.synchronize(device)
        return Snapshot(copied, None, buffers)

    def give_back(self, buffers: list[torch.UntypedStorage]) -> None:
        """Keep ``buffers`` for the next snapshot (replacing what was kept before)."""
        pool: dict[int, list[torch.UntypedStorage]] = {}
        for buffer in buffers:
            pool.setdefault(buffer.nbytes(), []).append(buffer)
        with self._lock:
            self._pool = pool

    def release(self) -> None:
        """Free the kept buffers."""
        with self._lock:
            self._pool = {}


def _walk(value: Any, copy: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Rebuild the containers of a storable payload with every tensor passed through ``copy``."""
    if isinstance(value, torch.Tensor):
        return copy(value)
    if isinstance(value, dict):
        return {k: _walk(v, copy) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, copy) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, copy) for v in value)
    if isinstance(value, set | frozenset):
        return type(value)(_walk(v, copy) for v in value)
    return value  # numbers, strings, bytes, None, dtypes, devices: immutable


def _copy_tensor(
    tensor: torch.Tensor,
    memo: dict[tuple[str, int, int], torch.UntypedStorage],
    pool: dict[int, list[torch.UntypedStorage]],
    buffers: list[torch.UntypedStorage],
    devices: set[torch.device],
) -> torch.Tensor:
    plain = type(tensor) is torch.Tensor and tensor.layout == torch.strided
    if not plain or tensor.is_quantized or tensor.is_nested or tensor.device.type == "meta":
        raise _CannotCopy
    if tensor.device.type not in ("cpu", "cuda"):
        raise _CannotCopy
    source = tensor.untyped_storage()
    key = (str(tensor.device), source.data_ptr(), source.nbytes())
    target = memo.get(key)
    if target is None:
        size = source.nbytes()
        free = pool.get(size)
        on_gpu = tensor.device.type == "cuda"
        if free:
            target = free.pop()
        else:
            target = torch.empty(size, dtype=torch.uint8, pin_memory=on_gpu).untyped_storage()
        target.copy_(source, non_blocking=on_gpu)
        if on_gpu:
            devices.add(tensor.device)
        memo[key] = target
        buffers.append(target)
    # Same offset, shape and strides over the copied storage: views stay views.
    out = torch.empty(0, dtype=tensor.dtype)
    out.set_(target, tensor.storage_offset(), tensor.size(), tensor.stride())
    # The storage holds what a conjugate or negative view reads before its flag applies.
    if tensor.is_conj():
        out = out.conj()
    if tensor.is_neg():
        out = torch._neg_view(out)
    if tensor.requires_grad:  # torch.save keeps the flag: so does the background write
        out.requires_grad_(True)
    return out


class BackgroundWriter:
    """Runs write jobs one at a time on a non-daemon thread and keeps their first error.

    Args:
        name: Thread name (shown in stack dumps).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._failed_job = ""

    @property
    def busy(self) -> bool:
        """Whether a job is still running."""
        return self._thread is not None and self._thread.is_alive()

    def submit(self, job: Callable[[], None], what: str) -> None:
        """Start ``job`` (after the previous one finished); ``what`` names it in errors."""
        self.join()
        thread = threading.Thread(target=self._run, args=(job, what), name=self.name)
        self._thread = thread
        thread.start()

    def _run(self, job: Callable[[], None], what: str) -> None:
        try:
            job()
        except BaseException as error:  # kept for the caller; a thread cannot raise to it
            if self._error is None:
                self._error, self._failed_job = error, what

    def join(self) -> None:
        """Wait for the running job, if any."""
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None

    def take_error(self) -> tuple[BaseException, str] | None:
        """The first error since the last call (and what failed), cleared once taken."""
        if self._error is None:
            return None
        error, what = self._error, self._failed_job
        self._error, self._failed_job = None, ""
        return error, what

    def __del__(self) -> None:
        if self._error is not None:  # never dropped silently, even if nobody asked
            warnings.warn(
                f"{self._failed_job} failed in the background and was never reported: "
                f"{type(self._error).__name__}: {self._error}",
                RuntimeWarning,
                stacklevel=1,
            )


_EXIT_HOOKED = False
_AT_EXIT: weakref.WeakSet[Any] = weakref.WeakSet()


def register_for_exit(owner: Any) -> None:
    """Call ``owner.wait()`` when the interpreter exits normally (errors are printed).

    The hook is installed the first time an owner registers (never at import).
    """
    global _EXIT_HOOKED
    _AT_EXIT.add(owner)
    if not _EXIT_HOOKED:
        atexit.register(_flush_all)
        _EXIT_HOOKED = True


def _flush_all() -> None:
    for owner in list(_AT_EXIT):
        try:
            owner.wait()
        except Exception as error:
            print(f"scramjet: {error}", file=sys.stderr)
