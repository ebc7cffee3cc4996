"""In-process, threaded batch loader for packs (``PackedDataset.loader(backend="threads")``).

Why: decoding a JPEG with simplejpeg (libjpeg-turbo) and copying raw pixels out of a
memory map both run without the GIL, so threads in one process decode in parallel. A
worker process has to hand every batch to the main process, and for raw images that hand-
over costs more than reading the pixels (``docs/bench/data.md``). Here a pool of threads
reads and decodes whole batches straight into batch buffers, a few batches ahead of the
training loop, and nothing crosses a process boundary.

Buffers: an image batch is decoded into a buffer made once and reused. A yielded batch
owns its buffer for as long as any tensor made from it is alive (the tensor's storage
holds the numpy view the buffer lends; a weak reference to that view says when the last
one is gone), so a batch that is kept (``list(loader)``) is never overwritten. With CUDA
present, buffers are pinned and come from torch's pinned-memory cache instead, which
also waits for pending non-blocking copies to the device before reusing a block.

Streamed packs: the shards of a pack read from a URL are downloaded as the epoch reaches
them and let go when it moves on. The iterating thread pins each batch's shards (waiting
for their download) before handing the batch to a reading thread, which unpins them when
done, so reading threads never open, close or wait for a shard, and under a
``cache_limit`` a shard leaves the cache's in-use set as soon as no batch being read
needs it.

Order: the batches are those of ``BatchSampler(sampler, batch_size, drop_last)``, the same
as the worker-process loader's for the same sampler. :class:`EpochOrder` adds what exact
mid-epoch resume needs: :meth:`EpochOrder.set_epoch` makes a shuffled order a function of
the generator's initial seed and the epoch, and :meth:`EpochOrder.set_start` skips indices
that were already consumed, without reading them.
"""

from __future__ import annotations

import itertools
import os
import threading
import warnings
import weakref
from collections import deque
from collections.abc import Iterator, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch.utils.data import BatchSampler, Sampler

from scramjet.data._epoch import SharedEpoch
from scramjet.data._start import check_start

if TYPE_CHECKING:
    from scramjet.data.reader import PackedDataset

BACKENDS = ("auto", "threads", "processes")
THREAD_OPTIONS = ("pin_memory", "prefetch_factor")  # DataLoader settings threads understand
_EPOCH_STRIDE = 1_000_003  # seed of epoch e: initial seed + e * stride


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def choose_backend(backend: str, has_transform: bool, kwargs: dict[str, Any]) -> str:
    """Resolve ``backend="auto"``: threads unless a transform or a process-only setting.

    A transform written in Python holds the GIL, so threads would run it one at a time;
    settings such as ``persistent_workers`` or ``worker_init_fn`` only mean something for
    worker processes. Local and streamed packs are read the same way.

    Raises:
        ValueError: an unknown backend, or ``"threads"`` with a process-only setting.
    """
    if backend not in BACKENDS:
        raise ValueError(
            f"backend must be one of {BACKENDS}, got {backend!r}; 'threads' reads in this "
            "process, 'processes' in DataLoader worker processes"
        )
    process_only = sorted(k for k in kwargs if k not in THREAD_OPTIONS)
    if backend == "threads" and process_only:
        raise ValueError(
            f"backend='threads' does not take the DataLoader settings {process_only}; it "
            f"understands {list(THREAD_OPTIONS)}. Drop them, or use backend='processes'."
        )
    if backend == "auto":
        return "processes" if has_transform or process_only else "threads"
    return backend


class EpochOrder(Sampler[int]):
    """A sampler's indices, reproducible per epoch and resumable mid-epoch.

    Args:
        sampler: the indices (``RandomSampler``, ``SequentialSampler``,
            ``DistributedSampler``...).
        seed: when the sampler draws from a ``generator`` (``RandomSampler``,
            ``SubsetRandomSampler``, ``WeightedRandomSampler``...; one is given to it if it
            has None), the first iteration after :meth:`set_epoch` reseeds that generator
            with ``seed + epoch * 1_000_003`` (at the start of the iteration, so that
            whoever else reseeded the generator in between, such as the Trainer's
            reseeding of DataLoaders, does not change the order): the epoch's order is
            the same on a resume. Without a call to ``set_epoch`` the generator runs on
            as a DataLoader's would.
        seed_drawn: ``seed`` was drawn from torch's global RNG, not given (no
            ``generator=``): a Trainer then replaces it with its run's seed, which its
            checkpoints keep, so that a resumed run in a new process takes the same order.
    """

    def __init__(
        self, sampler: Sampler[int], seed: int | None = None, seed_drawn: bool = False
    ) -> None:
        self.sampler = sampler
        self.seed = seed
        self.seed_drawn = seed_drawn and seed is not None
        self.epoch = 0
        self.start = 0  # skipped by the next iteration only
        self._skipped = 0  # what the iteration under way skipped (for __len__)
        self._reseed = False  # set_epoch was called: the next iteration reseeds

    def set_epoch(self, epoch: int) -> None:
        """Select ``epoch``'s order (forwarded to the sampler when it has ``set_epoch``)."""
        self.epoch = int(epoch)
        self._skipped = 0  # a new epoch is read from its beginning
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(self.epoch)
        self._reseed = True
        self._seed_generator()

    def _seed_generator(self) -> None:
        if self.seed is None or not hasattr(self.sampler, "generator"):
            return
        generator = self.sampler.generator
        if generator is None:  # it would draw from the global RNG, which a resume restores
            generator = self.sampler.generator = torch.Generator()
        if isinstance(generator, torch.Generator):
            generator.manual_seed(self.seed + self.epoch * _EPOCH_STRIDE)

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` indices of the next iteration (resuming mid-epoch);
        the iterations after it start from their beginning again."""
        self.start, self._skipped = check_start(start), 0

    def __iter__(self) -> Iterator[int]:
        if self._reseed:
            self._reseed = False
            self._seed_generator()
        self._skipped, self.start = self.start, 0
        return itertools.islice(iter(self.sampler), self._skipped, None)

    def __len__(self) -> int:
        """Indices of the next iteration, or of the one under way (a resumed one is short)."""
        n = len(self.sampler) if isinstance(self.sampler, Sized) else 0
        return max(0, n - (self.start or self._skipped))

    @property
    def num_replicas(self) -> int:
        """The processes the wrapped sampler splits the data across (1 if it does not)."""
        return int(getattr(self.sampler, "num_replicas", 1))


class EpochBatches(BatchSampler):
    """``BatchSampler`` over an epoch-aware sampler (:class:`EpochOrder`, ``EpochSampler``).

    The batch sampler of ``PackedDataset.loader(..., backend="processes")``: given to a
    DataLoader as its ``sampler`` (with ``batch_size=None``), it is what the Trainer finds
    as ``loader.sampler``, so :meth:`set_epoch` and :meth:`set_start` (in samples) reach
    the order exactly as they do for the threaded loader: the same batches every epoch,
    and a mid-epoch resume that skips the consumed samples without reading them.
    """

    def set_epoch(self, epoch: int) -> None:
        """Select ``epoch``'s order (forwarded to the sampler)."""
        cast(Any, self.sampler).set_epoch(epoch)  # EpochOrder or alike

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` indices (samples, not batches) of the next iteration."""
        cast(Any, self.sampler).set_start(start)

    @property
    def num_replicas(self) -> int:
        """The processes the sampler splits the data across (1 if it does not)."""
        return int(getattr(self.sampler, "num_replicas", 1))


def order_seed(sampler: Sampler[int], generator: torch.Generator | None) -> int | None:
    """The seed of :class:`EpochOrder` for ``sampler``: the loader's ``generator``'s, else
    that of the sampler's own generator, else (a sampler that draws from torch's global
    RNG) one drawn from torch's global RNG now; None for a sampler that draws nothing."""
    if generator is not None:
        return int(generator.initial_seed())
    if not hasattr(sampler, "generator"):
        return None
    own = sampler.generator
    if isinstance(own, torch.Generator):
        return int(own.initial_seed())
    return int(seeded_generator().initial_seed())


def seeded_generator() -> torch.Generator:
    """A generator seeded from torch's global RNG (``torch.manual_seed`` makes it fixed)."""
    return torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, ()).item()))


class _Buffers:
    """Reusable image batch buffers; a buffer is free once no tensor made from it lives."""

    def __init__(self, shape: tuple[int, ...], pinned: bool) -> None:
        self.shape, self.pinned = shape, pinned
        self._free: list[np.ndarray] = []
        self._lent: list[tuple[np.ndarray, weakref.ref[np.ndarray]]] = []
        self._lock = threading.Lock()

    def take(self, n: int) -> tuple[np.ndarray, torch.Tensor | None]:
        """A buffer for ``n`` images: the array to decode into, and its pinned tensor.

        Pinned buffers come from torch's pinned-memory cache, which reuses a block only
        after the non-blocking device copies made from it have finished.
        """
        if self.pinned:
            pinned = torch.empty((n, *self.shape[1:]), dtype=torch.uint8, pin_memory=True)
            return pinned.numpy(), pinned
        with self._lock:
            lent = []
            for base, ref in self._lent:
                if ref() is None:
                    self._free.append(base)
                else:
                    lent.append((base, ref))
            self._lent = lent
            base = self._free.pop() if self._free else np.empty(self.shape, np.uint8)
        return base[:n], None

    def lend(self, filled: np.ndarray, pinned: torch.Tensor | None) -> torch.Tensor:
        """The tensor handed out for a filled buffer; the buffer is lent while it lives."""
        if pinned is not None:
            return pinned
        handed = filled.view()  # a fresh array object: only the tensor's storage holds it
        base = filled.base if isinstance(filled.base, np.ndarray) else filled
        with self._lock:
            self._lent.append((base, weakref.ref(handed)))
        return torch.from_numpy(handed)


def _pinning(requested: bool | None) -> bool:
    """Whether to pin image buffers: by default when CUDA is available.

    ``pin_memory=True`` without CUDA warns and reads into ordinary memory, as a
    DataLoader does (pinned memory needs a device).
    """
    available = torch.cuda.is_available()
    if requested and not available:
        warnings.warn(
            "pin_memory=True, but CUDA is not available: reading into ordinary memory",
            UserWarning,
            stacklevel=5,  # the caller of PackedDataset.loader (through make_loader)
        )
    return available if requested is None else bool(requested) and available


def _snapshot(dataset: PackedDataset, columns: list[Any] | None = None) -> PackedDataset:
    """A shallow copy that shares the open shard maps, with the epoch fixed at this moment.

    Every shard of a local pack is opened here, in the calling thread, so that the reading
    threads never open (or hash) a shard at the same time; a streamed pack's shards are
    opened batch by batch by the thread that hands out the batches (``PackedDataset._pin``).
    ``columns`` narrows the columns read.
    """
    if dataset.verify_mode == "open":
        dataset.verify()  # parallel hashing, once, before anything is read
    dataset._shard_reset()  # this process's handles, shared by the copies
    for k in range(0 if dataset.streamed else len(dataset.manifest.shards)):
        dataset._shard(k)
    copy: PackedDataset = object.__new__(type(dataset))
    copy.__dict__.update(dataset.__dict__)  # not copy.copy: pickling state drops the maps
    copy._epoch_cell = SharedEpoch(dataset.epoch)  # this iteration's epoch, fixed
    if columns is not None:
        copy.columns = columns
    return copy


class ThreadedLoader:
    """Batches of a :class:`~scramjet.data.PackedDataset`, read by threads in this process.

    Made by ``PackedDataset.loader(..., backend="threads")``. Iterating yields the same
    batches as the worker-process loader with the same sampler (dicts of tensors: images
    ``B x H x W x C`` uint8). ``threads`` threads each read and decode whole batches into
    reused buffers, ``threads x prefetch`` batches ahead of the consumer.

    For the Trainer: pass the loader as ``train_dataset``. It is used as given; every epoch
    the Trainer calls :meth:`set_epoch` (the order and the augmentations' epoch) and, when
    resuming mid-epoch, ``loader.sampler.set_start(consumed samples)``, which skips the
    consumed indices without reading them. A shuffled order then depends only on the
    generator's initial seed and the epoch.

    Args:
        dataset: the pack.
        batch_size: samples per batch.
        sampler: the index order: an :class:`EpochOrder`, or a sampler with
            ``set_epoch`` and ``set_start`` of its own (the Trainer's ``EpochSampler``,
            which skips a resume's consumed samples before a streamed pack downloads
            the shards only they use).
        drop_last: drop the last incomplete batch.
        threads: reading threads (0: one per usable core).
        prefetch: batches read ahead per thread.
        pin_memory: pinned image buffers (default: when CUDA is available).
        decode_device: decode JPEG images on this device (``"cuda"``) with torchvision;
            falls back to the CPU, with one warning, where that is not possible.
    """

    def __init__(
        self,
        dataset: PackedDataset,
        batch_size: int,
        *,
        sampler: Sampler[int],
        drop_last: bool = False,
        threads: int = 0,
        prefetch: int = 2,
        pin_memory: bool | None = None,
        decode_device: str | torch.device | None = None,
    ) -> None:
        if batch_size < 1 or threads < 0 or prefetch < 1:
            raise ValueError(
                f"batch_size and prefetch must be >= 1 and threads >= 0, got batch_size="
                f"{batch_size}, prefetch={prefetch}, threads={threads}"
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.sampler = sampler
        self.drop_last = drop_last
        self.batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.threads = threads or usable_cores()
        self.prefetch = prefetch
        self.pin_memory = _pinning(pin_memory)
        self.image = next(
            (c for c in dataset.columns if c.kind == "image" and not c.sequence), None
        )
        self.decode_device = self._device_for(decode_device)
        shape = (batch_size, *self._image_shape())
        self._buffers = _Buffers(shape, self.pin_memory)

    def _image_shape(self) -> tuple[int, ...]:
        col = self.image
        if col is None:
            return ()
        return (col.height or 0, col.width or 0, col.channels or 3)

    def _device_for(self, device: str | torch.device | None) -> torch.device | None:
        """The decode device when it can be used, else None (CPU decode, one warning)."""
        if device is None:
            return None
        from scramjet.data._gpu_decode import usable_decode_device

        return usable_decode_device(device, self.image)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def set_epoch(self, epoch: int) -> None:
        """Select ``epoch``: its order, and the epoch the augmentations draw for."""
        self.dataset.set_epoch(epoch)
        self.sampler.set_epoch(epoch)  # type: ignore[attr-defined]  # EpochOrder or alike

    def _read(
        self, ds: PackedDataset, values: PackedDataset, indices: list[int], pinned: list[int]
    ) -> Any:
        """One batch, in a reading thread; then the streamed shards it pinned are let go."""
        try:
            return self._read_batch(ds, values, indices)
        finally:
            ds._unpin(pinned)

    def _read_batch(self, ds: PackedDataset, values: PackedDataset, indices: list[int]) -> Any:
        col = self.image
        if col is None or ds.transform is not None:
            return ds.get_batch(indices)
        if self.decode_device is not None:
            from scramjet.data._gpu_decode import read_on_device

            return read_on_device(ds, values, col, indices, self.decode_device)
        view, pinned = self._buffers.take(len(indices))
        batch = ds.get_batch(indices, image_out=view)
        batch[col.name] = self._buffers.lend(view, pinned)
        return batch

    def __iter__(self) -> Iterator[Any]:
        ds = _snapshot(self.dataset)
        values = _snapshot(ds, [c for c in ds.columns if c is not self.image])
        batches: Iterator[list[int]] = iter(self.batch_sampler)
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="scramjet-pack-read")
        pending: deque[tuple[Future[Any], list[int]]] = deque()

        def submit(count: int) -> None:
            for indices in itertools.islice(batches, count):
                pinned = ds._pin(indices)  # a streamed pack's shards, downloaded if missing
                pending.append((pool.submit(self._read, ds, values, indices, pinned), pinned))

        try:
            submit(self.threads * self.prefetch)
            while pending:
                future = pending.popleft()[0]
                submit(1)  # before waiting: its shards are pinned while these are in use
                batch = future.result()
                yield batch
                del batch  # the consumer's reference alone keeps its buffer lent
        finally:
            for future, pinned in pending:
                if future.cancel():  # never ran: its shards are still pinned
                    ds._unpin(pinned)
            pool.shutdown(wait=True)  # no thread writes into a buffer after this

    def __repr__(self) -> str:
        return (
            f"ThreadedLoader({self.dataset!r}, batch_size={self.batch_size}, "
            f"threads={self.threads}, batches={len(self)})"
        )
