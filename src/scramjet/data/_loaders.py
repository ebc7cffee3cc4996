"""The loaders of a :class:`~scramjet.data.PackedDataset` (``ds.loader(...)``).

``make_loader`` checks the arguments, settles the sampler (one with ``set_epoch`` and
``set_start``, so the Trainer can order and resume it) and builds either the in-process
:class:`~scramjet.data._threads.ThreadedLoader` or a DataLoader whose worker processes read
whole batches; with persistent workers and image columns, those batches travel through
shared-memory slots made once (``_ring.py``).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, RandomSampler, Sampler, SequentialSampler

from scramjet.data._args import (
    check_batch_size,
    check_batching_settings,
    check_generator,
    check_num_workers,
    check_prefetch_factor,
    check_shuffle_and_sampler,
)
from scramjet.data._ring import GenerationBatches, RingLoader, SlotRing
from scramjet.runtime.processes import fit_socket_tempdir

if TYPE_CHECKING:
    from scramjet.data._threads import EpochBatches, ThreadedLoader
    from scramjet.data.reader import PackedDataset


def make_loader(
    ds: PackedDataset,
    batch_size: int,
    *,
    shuffle: bool,
    drop_last: bool,
    num_workers: int,
    sampler: Sampler[int] | None,
    generator: torch.Generator | None,
    backend: str,
    decode_device: str | torch.device | None,
    kwargs: dict[str, Any],
) -> DataLoader[Any] | ThreadedLoader:
    """What :meth:`PackedDataset.loader` returns (see there)."""
    from scramjet.data._threads import (
        EpochBatches,
        EpochOrder,
        choose_backend,
        order_seed,
        seeded_generator,
    )

    batch_size = check_batch_size(batch_size)
    check_shuffle_and_sampler(shuffle, sampler)
    check_batching_settings(kwargs)
    prefetch = check_prefetch_factor(kwargs)
    chosen = choose_backend(backend, ds.transform is not None, kwargs)
    num_workers = check_num_workers(num_workers, chosen)
    check_generator(generator)
    if (num_workers > 0 or chosen == "threads") and ds.verify_mode == "open":
        ds.verify()  # once here, instead of in every worker (and every epoch)
    given = generator is not None or isinstance(
        getattr(sampler, "generator", None), torch.Generator
    )
    if sampler is None:
        if shuffle and generator is None:
            generator = seeded_generator()  # reseeded per epoch by set_epoch
        sampler = RandomSampler(ds, generator=generator) if shuffle else SequentialSampler(ds)
    if not (hasattr(sampler, "set_epoch") and hasattr(sampler, "set_start")):
        sampler = EpochOrder(sampler, order_seed(sampler, generator), not given)
    if chosen == "threads":
        from scramjet.data._threads import ThreadedLoader

        return ThreadedLoader(
            ds, batch_size, sampler=sampler, drop_last=drop_last,
            threads=num_workers, prefetch=prefetch or 2,
            pin_memory=kwargs.get("pin_memory"), decode_device=decode_device,
        )  # fmt: skip
    if decode_device is not None:
        raise ValueError(
            f"decode_device={decode_device!r} needs backend='threads' (got {backend!r}, "
            "which chose worker processes); pass backend='threads'"
        )
    if num_workers > 1:  # each worker process keeps its own shards in the cache
        ds.read_ahead_room(readers=num_workers)
    return _process_loader(ds, EpochBatches(sampler, batch_size, drop_last), num_workers, kwargs)


def _process_loader(
    ds: PackedDataset, batches: EpochBatches, num_workers: int, kwargs: dict[str, Any]
) -> DataLoader[Any]:
    """A DataLoader whose worker processes read the whole batches of ``batches``."""
    if num_workers > 0:
        fit_socket_tempdir()  # Python < 3.13 with a long TMPDIR: workers could not deliver
    batch_size = batches.batch_size
    images = [c for c in ds.columns if c.kind == "image" and not c.sequence]
    plain = ds.transform is None
    if not (num_workers > 0 and kwargs.get("persistent_workers") and images and plain):
        return DataLoader(ds, batch_size=None, sampler=batches, num_workers=num_workers, **kwargs)
    # Persistent workers: reuse shared batch slots instead of a new segment per batch.
    col = images[0]
    shape = (batch_size, col.height or 0, col.width or 0, col.channels or 3)
    ring = SlotRing(num_workers, int(kwargs.get("prefetch_factor") or 2) + 1, shape)
    dataset = copy.copy(ds)
    dataset._ring = ring
    dataset._epoch_cell = ds._epoch_cell  # ds.set_epoch(e) reaches the loader's copy
    tagged = GenerationBatches(batches)
    loader = DataLoader(dataset, batch_size=None, sampler=tagged, num_workers=num_workers, **kwargs)
    # RingLoader stands in for the DataLoader (its other attributes are the loader's).
    return RingLoader(loader, ring, tagged)  # type: ignore[return-value]
