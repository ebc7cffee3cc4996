"""The samplers behind a Trainer's data order: indices that depend only on (seed, epoch,
rank), and wrappers that let a resume skip what an epoch already consumed.

:class:`EpochSampler` (training: this rank's share of a seeded order, resumable on another
number of processes), :class:`ShardSampler` (evaluation and prediction: ``r, r + W, ...``
without padding), :class:`SkipSampler` and :class:`SkipBatches` (a user's sampler or batch
sampler, with its first indices or batches skipped on resume). :func:`explain_index_errors`
names the first index a dataset's ``__len__`` promises but its ``__getitem__`` cannot serve.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Iterator, Sized
from typing import TypeVar, cast

import numpy as np
import torch
from torch.utils.data import Sampler

from scramjet.data._start import check_start
from scramjet.runtime.seeding import get_rng_states, set_rng_states

T = TypeVar("T")


class EpochSampler(Sampler[int]):
    """Shuffled (or sequential) order over ``range(n)`` that depends only on seed and epoch.

    The epoch's *global* order is a function of (seed, epoch) alone, whatever the number
    of processes; with ``num_replicas > 1`` rank ``r`` takes positions ``r, r + W, ...``
    of it, like ``DistributedSampler`` (padded by repeating from the start of the epoch,
    so every rank takes the same number of steps, or trimmed with ``drop_last``).

    A resume skips the first ``consumed`` positions of the global order
    (:meth:`set_consumed`) and splits the rest among the processes of the new run, which
    may be more or fewer than before: each remaining sample is seen exactly once.

    A dataset with ``shard_sizes`` and a ``shuffle_window`` (a streamed
    :class:`~scramjet.data.PackedDataset`) is shuffled shard-aware: the shards are put in
    a random order, and the samples of each run of ``shuffle_window`` consecutive shards
    are shuffled together, so the epoch reads a few whole shards at a time. A dataset
    with ``read_ahead`` is told this rank's order, to fetch what it will read next.
    """

    def __init__(
        self,
        data_source: Sized,
        *,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        drop_last: bool = False,
    ) -> None:
        for name, value in (("num_replicas", num_replicas), ("rank", rank)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise TypeError(
                    f"EpochSampler: {name} must be an int; received "
                    f"{type(value).__name__} {value!r}."
                )
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(
                f"EpochSampler: rank must be in [0, num_replicas - 1] and num_replicas >= 1; "
                f"received rank={rank}, num_replicas={num_replicas}. Pass "
                f"num_replicas=get_world_size() and rank=get_rank() "
                f"(scramjet.runtime.distributed)."
            )
        self.data_source = data_source
        self.shuffle = shuffle
        self.seed = int(seed)
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.drop_last = drop_last
        self.epoch = 0
        self.consumed = 0

    @property
    def n(self) -> int:
        """The dataset's length now: read at every epoch, as torch's samplers do, so a
        dataset that grows or shrinks between epochs (curriculum learning) is covered."""
        return len(self.data_source)

    @property
    def start(self) -> int:
        """Positions of this rank's order skipped by :meth:`set_start` (``consumed / W``)."""
        return self.consumed // self.num_replicas

    @property
    def per_rank(self) -> int:
        """Samples each rank takes from the whole epoch."""
        if self.drop_last:
            return self.n // self.num_replicas
        return math.ceil(self.n / self.num_replicas)

    def set_epoch(self, epoch: int) -> None:
        """Select the order of ``epoch`` (a new permutation every epoch when shuffling)."""
        self.epoch = epoch

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` indices of this rank's order (every rank did the same)."""
        self.set_consumed(check_start(start) * self.num_replicas)

    def set_consumed(self, consumed: int) -> None:
        """Skip the first ``consumed`` positions of the epoch's global order (a resume,
        possibly saved by a run with another number of processes)."""
        self.consumed = check_start(consumed, "positions of the global order")

    def global_order(self) -> list[int]:
        """The epoch's order over every sample: a function of (seed, epoch) only."""
        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        sizes = getattr(self.data_source, "shard_sizes", None)
        window = getattr(self.data_source, "shuffle_window", None)
        if not window or not sizes or sum(sizes) != self.n:
            return cast(list[int], torch.randperm(self.n, generator=g).tolist())
        return shard_window_order(list(sizes), int(window), g)

    def _remaining(self) -> list[int]:
        order = self.global_order()
        left = order[min(self.consumed, len(order)) :]
        world = self.num_replicas
        if self.drop_last:
            return left[: len(left) - len(left) % world]
        pad = -len(left) % world
        if pad and order:  # repeat from the epoch's start, as often as needed
            left = left + (order * math.ceil(pad / len(order)))[:pad]
        return left

    def __iter__(self) -> Iterator[int]:
        mine = self._remaining()[self.rank :: self.num_replicas]
        read_ahead = getattr(self.data_source, "read_ahead", None)
        if callable(read_ahead):
            return cast(Iterator[int], iter(read_ahead(mine)))
        return iter(mine)

    def __len__(self) -> int:
        left = max(0, self.n - self.consumed)
        if self.drop_last:
            return left // self.num_replicas
        return math.ceil(left / self.num_replicas)


def shard_window_order(sizes: list[int], window: int, generator: torch.Generator) -> list[int]:
    """A shuffled order over the samples of consecutive shards of ``sizes`` samples each.

    The shards are permuted, then every run of ``window`` of them (in that permuted order)
    has its samples shuffled together. ``window >= len(sizes)`` is a full shuffle.
    """
    starts = [0, *itertools.accumulate(sizes)]
    shards = torch.randperm(len(sizes), generator=generator).tolist()
    order: list[int] = []
    for w in range(0, len(shards), window):
        group = torch.cat(
            [torch.arange(starts[k], starts[k + 1]) for k in shards[w : w + window]]
            or [torch.zeros(0, dtype=torch.long)]
        )
        order += group[torch.randperm(len(group), generator=generator)].tolist()
    return order


class ShardSampler(Sampler[int]):
    """Rank ``r`` of ``W`` takes indices ``r, r + W, ...`` in order, without padding.

    Used for evaluation and prediction, where padding would count samples twice; the
    gathered outputs are put back in dataset order with :func:`gather_shards`. When
    every forward is a collective (FSDP), :class:`Lockstep` evens out the batch counts.
    """

    def __init__(self, data_source: Sized, num_replicas: int = 1, rank: int = 0) -> None:
        self.data_source = data_source
        self.num_replicas = num_replicas
        self.rank = rank

    @property
    def n(self) -> int:
        """The dataset's length now (read at every evaluation)."""
        return len(self.data_source)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.n, self.num_replicas))

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.num_replicas))


class EvenShardBatches(Sampler[list[int]]):
    """A rank's :class:`ShardSampler` share in as many batches as every other rank's.

    Shares differ by one sample at most, and so can their batch counts (33 samples on 2
    ranks in batches of 4: 5 batches and 4). A callback that reduces or gathers at every
    evaluation step would then pair one rank's call with another's different one (gloo
    aborts). Here the rank one batch short splits its last full batch in two (``4, 4,
    4, 3, 1``): no sample padded or repeated, at most ``batch_size`` per batch. With
    batches of one sample that cannot be done; those shares keep their own counts.
    """

    def __init__(self, share: ShardSampler, batch_size: int) -> None:
        self.share, self.batch_size = share, batch_size

    @property
    def count(self) -> int:
        """Batches of the largest share (rank 0's), for the dataset's length now."""
        most = -(-self.share.n // self.share.num_replicas)
        return -(-most // self.batch_size)

    def _splits_last(self, n: int) -> bool:
        """Whether a share of ``n`` samples is one batch short and can split its last."""
        return self.batch_size > 1 and n > 0 and -(-n // self.batch_size) == self.count - 1

    def __iter__(self) -> Iterator[list[int]]:
        indices, size = list(self.share), self.batch_size
        batches = [indices[i : i + size] for i in range(0, len(indices), size)]
        if self._splits_last(len(indices)):
            last = batches.pop()
            batches += [last[:-1], last[-1:]]
        return iter(batches)

    def __len__(self) -> int:
        n = len(self.share)
        return self.count if self._splits_last(n) else -(-n // self.batch_size)


class SkipSampler(Sampler[int]):
    """Wraps any sampler and skips its first ``start`` indices (for user-given samplers).

    With :meth:`set_draw_seed`, the wrapped sampler starts each iteration (``iter`` and the
    first index, where a shuffle is drawn) with Python's, NumPy's and torch's global
    generators seeded from that seed, and those generators are then put back: a sampler
    that shuffles with ``torch.randperm`` or ``random.shuffle`` gives the same order when a
    resumed run rebuilds the epoch, and the skipped indices draw nothing.
    """

    def __init__(self, sampler: Sampler[int]) -> None:
        self.sampler = sampler
        self.start = 0
        self.draw_seed: int | None = None

    def set_epoch(self, epoch: int) -> None:
        """Forward ``set_epoch`` to the wrapped sampler when it has one."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` indices of the next iteration."""
        self.start = check_start(start)

    def set_draw_seed(self, seed: int | None) -> None:
        """Seed the global generators while the next iteration draws its order."""
        self.draw_seed = seed

    def __iter__(self) -> Iterator[int]:
        return read_past(self.sampler, self.start, self.draw_seed)

    def __len__(self) -> int:
        return max(0, safe_len(self.sampler) - self.start)


class SkipBatches(Sampler[list[int]]):
    """Wraps a user's batch sampler (``batch_sampler=`` in the dataloader kwargs): forwards
    ``set_epoch`` and skips its first ``start`` batches (a resume, counted in batches)."""

    def __init__(self, batch_sampler: Iterable[list[int]]) -> None:
        self.batch_sampler = batch_sampler
        self.start = 0
        self.draw_seed: int | None = None

    @property
    def batch_size(self) -> int | None:
        """The wrapped sampler's ``batch_size``, when it has one."""
        size = getattr(self.batch_sampler, "batch_size", None)
        return size if isinstance(size, int) else None

    def set_epoch(self, epoch: int) -> None:
        """Forward ``set_epoch`` to the wrapped sampler when it has one."""
        if hasattr(self.batch_sampler, "set_epoch"):
            self.batch_sampler.set_epoch(epoch)

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` batches of the next iteration."""
        self.start = check_start(start, "batches")

    def set_draw_seed(self, seed: int | None) -> None:
        """Seed the global generators while the next iteration draws its batches (see
        :class:`SkipSampler`)."""
        self.draw_seed = seed

    def __iter__(self) -> Iterator[list[int]]:
        return read_past(self.batch_sampler, self.start, self.draw_seed)

    def __len__(self) -> int:
        if not isinstance(self.batch_sampler, Sized):
            raise TypeError(f"{type(self.batch_sampler).__name__} has no length")
        return max(0, len(self.batch_sampler) - self.start)


def read_past(source: Iterable[T], skip: int, seed: int | None = None) -> Iterator[T]:
    """``source``'s items (indices, batches) after its first ``skip``, which are read and
    dropped.

    The random generators (Python, NumPy, torch) are put back as they were once the
    skipped items are read: what was drawn for them (random augmentations in
    ``__getitem__``, a shuffle) was drawn before the checkpoint that a resume restores, so
    the next item draws exactly what the uninterrupted run drew. With a ``seed``, the
    epoch starts (``iter`` and the first item, where a sampler or a stream draws its
    shuffle) with those generators seeded from it and then put back, so a shuffle drawn
    from them is the same when a resumed run rebuilds the epoch.
    """
    states = get_rng_states()
    if seed is None:
        iterator = iter(source)
    else:
        try:
            seed_global_generators(seed)
            iterator = iter(source)
            first = next(iterator, _END)
        finally:
            set_rng_states(states)
        if first is _END:
            return
        iterator = itertools.chain([cast(T, first)], iterator)
    if skip:
        for _ in itertools.islice(iterator, skip):
            pass
        set_rng_states(states)
    yield from iterator


_END = object()


def seed_global_generators(seed: int) -> None:
    """Seed Python's, NumPy's and torch's CPU global generators (not CUDA's)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.default_generator.manual_seed(seed)


def safe_len(obj: object) -> int:
    """``len(obj)``, or 0 when it has no length (an iterable dataset or loader)."""
    if not isinstance(obj, Sized):
        return 0
    try:  # a DataLoader over an IterableDataset has __len__, which raises TypeError
        return len(obj)
    except TypeError:
        return 0


def explain_index_errors(batches: Iterable[T], dataset: object, name: str) -> Iterator[T]:
    """``batches``, where an ``IndexError`` or ``KeyError`` raised while reading them is
    explained when ``dataset``'s ``__len__`` promises indices its ``__getitem__`` cannot
    serve (see :func:`index_error`)."""
    try:
        yield from batches
    except (IndexError, KeyError) as error:
        explained = index_error(error, dataset, name)
        if explained is error:
            raise
        raise explained from error


def index_error(error: Exception, dataset: object, name: str) -> Exception:
    """``error``, or a clearer one of its type when ``dataset[len(dataset) - 1]`` raises it
    too: the first index it cannot serve is then found by bisection (indices below it are
    taken to work) and named with ``len()``."""
    data = getattr(dataset, "dataset", dataset)  # a DataLoader's dataset
    size = safe_len(data)
    kind = type(error)
    if not size or not hasattr(data, "__getitem__"):
        return error

    def failure(index: int) -> Exception | None:
        try:
            data[index]
        except kind as raised:
            return raised
        except Exception:  # another error: this index exists
            return None
        return None

    with torch.random.fork_rng(devices=[]):
        own = failure(size - 1)
        if own is None:
            return error  # the last index works: the error is the dataset's own
        low, high = 0, size - 1  # the first failing index lies in [low, high]
        while low < high:
            middle = (low + high) // 2
            found = failure(middle)
            low, high, own = (low, middle, found) if found else (middle + 1, high, own)
    served = f"indices 0..{low - 1} only" if low else "no index"
    message = (
        f"{name} ({type(data).__name__}) has len() == {size}, but {type(data).__name__}"
        f"[{low}] raises {kind.__name__} ({own!s:.200}): its __getitem__ serves {served}. "
        f"Make __len__ return the number of samples __getitem__ can serve ({low}), e.g. "
        f"len() of the list or table the samples come from."
    )
    try:
        return kind(message)
    except Exception:  # an error type that takes other arguments: keep the original
        return error
