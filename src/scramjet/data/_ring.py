"""Reusable shared-memory batch slots for the batched DataLoader path.

Why: a DataLoader worker normally hands each batch tensor to the main process through a
freshly allocated shared-memory segment. For raw images that allocation and its page
faults cost several times more than reading the pixels (see docs/bench/data.md). Here
each worker owns a few slots in one shared buffer made once; it fills a slot, the main
process copies the batch out into ordinary memory and frees the slot.

Protocol (``state[worker, slot]``): 0 = free; ``g`` = holds a batch of iteration
(generation) ``g``. A worker waits until its next slot is free or holds a batch of an
older generation (one abandoned by a ``break``: persistent workers finish every old task
before a new iteration's tasks reach them). Each worker gets its tasks in increasing
order and the main process consumes batches in that order, so the earliest unconsumed
batch never waits on a slot: no deadlock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, cast

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Sampler


class BatchRequest(NamedTuple):
    """What the sampler hands a worker: the iteration's generation and the indices."""

    generation: int
    indices: list[int]


class SlotRef(NamedTuple):
    """Placeholder a worker returns instead of the image tensor: where the batch is."""

    worker: int
    slot: int
    n: int


def share_memory(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor.share_memory_()``: move its storage to shared memory in place, return it."""
    # Tensor.share_memory_ is unannotated in torch; it returns the tensor itself.
    share = cast("Callable[[], torch.Tensor]", tensor.share_memory_)
    return share()


class SlotRing:
    """``workers x slots`` shared batch buffers plus their state flags."""

    def __init__(self, workers: int, slots: int, batch_shape: tuple[int, ...]) -> None:
        self.data = torch.zeros((workers, slots, *batch_shape), dtype=torch.uint8)
        share_memory(self.data)
        self.state = share_memory(torch.zeros((workers, slots), dtype=torch.int64))
        self.slots = slots
        self._next = 0  # per process: each worker process has its own copy

    def acquire(self, worker: int, generation: int) -> tuple[int, np.ndarray]:
        """Wait for this worker's next slot; return it and a numpy view of its buffer."""
        slot = self._next
        self._next = (slot + 1) % self.slots
        state = self.state.numpy()
        while 0 < state[worker, slot] >= generation:
            time.sleep(0.0002)
        return slot, self.data[worker, slot].numpy()

    def publish(self, worker: int, slot: int, generation: int) -> None:
        """Mark a filled slot as holding a batch of ``generation``."""
        self.state[worker, slot] = generation

    def take(self, ref: SlotRef) -> torch.Tensor:
        """Main process: copy a batch out of its slot and free the slot."""
        out = self.data[ref.worker, ref.slot, : ref.n].clone()
        self.state[ref.worker, ref.slot] = 0
        return out


class GenerationBatches(Sampler[BatchRequest]):
    """A batch sampler that tags every batch with the current iteration's generation."""

    def __init__(self, batches: BatchSampler) -> None:
        self.batches = batches
        self.generation = 0

    def __iter__(self) -> Iterator[BatchRequest]:
        generation = self.generation
        for indices in self.batches:
            yield BatchRequest(generation, list(indices))

    def __len__(self) -> int:
        return len(self.batches)

    @property
    def batch_size(self) -> int | None:
        """Samples per batch (the wrapped batch sampler's)."""
        return self.batches.batch_size

    def set_epoch(self, epoch: int) -> None:
        """Select ``epoch``'s order (forwarded, like :meth:`set_start`, to the wrapped
        batch sampler: ``PackedDataset.loader``'s is an epoch-aware one)."""
        cast(Any, self.batches).set_epoch(epoch)

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` samples of the next iteration (a mid-epoch resume)."""
        cast(Any, self.batches).set_start(start)


class RingLoader:
    """Iterates a DataLoader whose workers fill ring slots; yields ordinary batches.

    Other attributes (``dataset``, ``batch_sampler``, ...) are the DataLoader's.
    """

    def __init__(self, loader: DataLoader[Any], ring: SlotRing, batches: GenerationBatches) -> None:
        self.loader, self.ring, self.batches = loader, ring, batches

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.batches.generation += 1  # before the DataLoader asks the sampler for batches
        for batch in self.loader:
            for key, value in batch.items():
                if isinstance(value, SlotRef):
                    batch[key] = self.ring.take(value)
            yield batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)
