"""The epoch a :class:`~scramjet.data.PackedDataset` draws its augmentations for.

It lives in shared memory: DataLoader worker processes get the dataset when they start
(forked, or pickled for ``spawn``), and with ``persistent_workers=True`` they keep that
copy for every epoch. Holding the epoch in a shared cell lets ``ds.set_epoch(e)`` in the
main process reach them: a worker reads the cell when it transforms a sample.

Cells are slots of shared blocks of :data:`BLOCK` int64 values, so that many datasets
hold one shared-memory segment (one file descriptor) between them, not one each. A slot
is given back when the object owning it is garbage-collected in the process that made
it; each process (a forked worker too) takes its slots from blocks of its own.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import torch

BLOCK = 256


class _Slots:
    """This process's blocks and free slots."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.free: list[tuple[torch.Tensor, int]] = []
        self.lock = threading.RLock()  # a collection inside take() may give a slot back

    def take(self) -> tuple[torch.Tensor, int]:
        with self.lock:
            if not self.free:
                block = torch.zeros(BLOCK, dtype=torch.int64)
                block.share_memory_()
                self.free.extend((block, i) for i in reversed(range(BLOCK)))
            return self.free.pop()

    def give_back(self, block: torch.Tensor, slot: int) -> None:
        if os.getpid() == self.pid:
            with self.lock:
                self.free.append((block, slot))


_slots = _Slots()


def _reset_after_fork() -> None:
    global _slots
    _slots = _Slots()  # a child never hands out its parent's slots


os.register_at_fork(after_in_child=_reset_after_fork)


class SharedEpoch:
    """An epoch number in shared memory, readable and settable from any process that
    holds a copy passed to a DataLoader worker.

    Pickled for a worker (torch's multiprocessing pickler), the copy reads and writes the
    same slot. Pickled to bytes, or deep-copied, the copy gets a slot of its own holding
    the same value.
    """

    def __init__(self, value: int = 0) -> None:
        self._owner: _Slots | None = _slots
        self._block, self._slot = _slots.take()
        self._values = self._block.numpy()  # the same memory: a read per sample costs ~0.1 µs
        self.set(value)

    def get(self) -> int:
        """The epoch."""
        return int(self._values[self._slot])

    def set(self, value: int) -> None:
        """Set the epoch, for every process sharing this slot."""
        self._values[self._slot] = int(value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._block, self._slot))

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedEpoch:
        return SharedEpoch(self.get())

    def __del__(self) -> None:
        owner = getattr(self, "_owner", None)
        if owner is not None:
            owner.give_back(self._block, self._slot)


def _rebuild(block: torch.Tensor, slot: int) -> SharedEpoch:
    if not block.is_shared():  # unpickled from bytes: a slot of its own
        return SharedEpoch(int(block[slot]))
    shared: SharedEpoch = object.__new__(SharedEpoch)
    shared._owner, shared._block, shared._slot = None, block, slot
    shared._values = block.numpy()
    return shared
