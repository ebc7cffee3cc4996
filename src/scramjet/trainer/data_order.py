"""Samplers whose order is a pure function of (seed, epoch), so a run can resume mid-epoch.

A resumed run rebuilds the epoch's order and *skips indices*, never batches of loaded
data: resuming costs no forward passes and no decoding of the skipped samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sized
from typing import Generic, TypeVar

import torch
from torch.utils.data import Sampler

from scramjet.runtime import distributed as dist

T = TypeVar("T")


class EpochSampler(Sampler[int]):
    """Shuffled (or sequential) order over ``range(n)`` that depends only on seed and epoch.

    With ``num_replicas > 1`` it yields this rank's share, like ``DistributedSampler``:
    the shuffled order is padded to a multiple of ``num_replicas`` (training needs equal
    step counts on every rank) and rank ``r`` takes positions ``r, r + W, ...``.
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
        self.n = len(data_source)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.num_replicas = num_replicas
        self.rank = rank
        self.drop_last = drop_last
        self.epoch = 0
        self.start = 0
        if drop_last and self.n % num_replicas:
            self.per_rank = self.n // num_replicas
        else:
            self.per_rank = math.ceil(self.n / num_replicas)

    def set_epoch(self, epoch: int) -> None:
        """Select the order of ``epoch`` (a new permutation every epoch when shuffling)."""
        self.epoch = epoch

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` indices of this rank's order (used when resuming)."""
        self.start = max(0, int(start))

    def _order(self) -> list[int]:
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.n, generator=g).tolist()
        else:
            order = list(range(self.n))
        total = self.per_rank * self.num_replicas
        if total > len(order):  # pad by repeating from the start, as DistributedSampler does
            order += order[: total - len(order)]
        else:
            order = order[:total]
        return order[self.rank : total : self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(self._order()[self.start :])

    def __len__(self) -> int:
        return max(0, self.per_rank - self.start)


class ShardSampler(Sampler[int]):
    """Rank ``r`` of ``W`` takes indices ``r, r + W, ...`` in order, without padding.

    Used for evaluation and prediction, where padding would count samples twice; the
    gathered outputs are put back in dataset order with :func:`interleave_shards`. When
    every forward is a collective (FSDP), :class:`Lockstep` evens out the batch counts.
    """

    def __init__(self, data_source: Sized, num_replicas: int = 1, rank: int = 0) -> None:
        self.n = len(data_source)
        self.num_replicas = num_replicas
        self.rank = rank

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.n, self.num_replicas))

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.num_replicas))


class SkipSampler(Sampler[int]):
    """Wraps any sampler and skips its first ``start`` indices (for user-given samplers)."""

    def __init__(self, sampler: Sampler[int]) -> None:
        self.sampler = sampler
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        """Forward ``set_epoch`` to the wrapped sampler when it has one."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def set_start(self, start: int) -> None:
        """Skip the first ``start`` indices of the next iteration."""
        self.start = max(0, int(start))

    def __iter__(self) -> Iterator[int]:
        it = iter(self.sampler)
        for _ in range(self.start):
            next(it, None)
        return it

    def __len__(self) -> int:
        return max(0, len(self.sampler) - self.start)  # type: ignore[arg-type]


def interleave_shards(shards: list[list[object]]) -> list[object]:
    """Undo :class:`ShardSampler`: ``shards[r]`` holds items ``r, r + W, ...``."""
    world = len(shards)
    total = sum(len(s) for s in shards)
    out: list[object] = [None] * total
    for rank, items in enumerate(shards):
        out[rank:total:world] = items
    return out


class Lockstep(Generic[T]):
    """Iterate ``(batch, is_real)`` so that every rank takes the same number of steps.

    Under FSDP each forward gathers parameters from all ranks, so a rank may not stop
    while another still runs batches. Ranks whose share (:class:`ShardSampler`, no
    padding) runs out first repeat their last batch with ``is_real=False`` until every
    rank is done: the caller runs the forward and discards its outputs, so no sample is
    counted twice. One tiny all-reduce per step decides, on every rank alike, whether
    another step is needed.

    Args:
        batches: This rank's batches.
        enabled: False yields every batch as real, with no communication.

    Raises:
        ValueError: On every rank, when some rank has no batch at all (fewer samples than
            processes): it would have nothing to repeat.
    """

    def __init__(self, batches: Iterable[T], enabled: bool = True) -> None:
        self.batches = batches
        self.enabled = enabled and dist.is_distributed()
        self._stop = False

    def stop(self) -> None:
        """End the iteration before the next step, on every rank (e.g. ``end_epoch()``)."""
        self._stop = True

    def __iter__(self) -> Iterator[tuple[T, bool]]:
        if not self.enabled:
            for item in self.batches:
                yield item, True
                if self._stop:
                    return
            return
        iterator = iter(self.batches)
        last: T | None = None
        have_last = False
        while True:
            batch: T | None
            try:
                batch, real = next(iterator), True
            except StopIteration:
                batch, real = last, False
            stuck = not real and not have_last
            flags = dist.reduce(torch.tensor([float(real), float(stuck), float(self._stop)]), "max")
            if flags[2] > 0 or flags[0] == 0:  # a rank was asked to stop, or all are done
                return
            if flags[1] > 0:
                raise ValueError(
                    "a rank has no evaluation batch while others do (fewer samples than "
                    f"processes: {dist.get_world_size()}); under FSDP every rank must run "
                    "forwards together. Evaluate or predict at least as many samples as "
                    "processes, or in a single process."
                )
            if real:
                last, have_last = batch, True
            yield batch, real  # type: ignore[misc]
