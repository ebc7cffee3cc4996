"""Which of a user's DataLoaders the Trainer rebuilds (sharded, resumable) and with what.

A DataLoader over a map-style dataset drawn in order or plainly shuffled is rebuilt from
its dataset, batch size and settings; any other loader or iterable of batches is used as
it is, so a sampler of the user's own keeps its order and epoch length.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler

_LOADER_KEYS = ("num_workers", "pin_memory", "worker_init_fn", "timeout")


class LoaderSpec(NamedTuple):
    """What the Trainer needs to rebuild a user's DataLoader (sharded, resumable)."""

    dataset: Any
    batch_size: int
    kwargs: dict[str, Any]  # DataLoader settings, the collate function included
    as_is: bool  # the loader cannot be rebuilt: its batches are used as they come


def loader_spec(loader: Any, train: bool) -> LoaderSpec:
    """Dataset, batch size and settings of a plain DataLoader; ``as_is`` for any other loader.

    Plain: a map-style dataset in batches of ``batch_size`` drawn in order or shuffled
    (``shuffle=True``). Any other sampler (a subclass, ``RandomSampler(replacement=True,
    num_samples=...)``, ``WeightedRandomSampler``) decides the order and the epoch's
    length itself, so its loader is used as it is.
    """
    rebuildable = (
        isinstance(loader, DataLoader)
        and loader.batch_size is not None
        and not isinstance(loader.dataset, IterableDataset)
        and _plain_sampler(loader.sampler)
    )
    if not rebuildable:
        return LoaderSpec(loader, getattr(loader, "batch_size", None) or 1, {}, True)
    kwargs = {k: getattr(loader, k) for k in _LOADER_KEYS}
    kwargs["collate_fn"] = loader.collate_fn
    if loader.num_workers > 0:
        kwargs.update(
            persistent_workers=loader.persistent_workers, prefetch_factor=loader.prefetch_factor
        )
    if train:
        kwargs.update(shuffle=isinstance(loader.sampler, RandomSampler))
    if train or loader.drop_last:  # evaluating the training set drops what training drops
        kwargs.update(drop_last=loader.drop_last)
    return LoaderSpec(loader.dataset, int(loader.batch_size), kwargs, False)


def _plain_sampler(sampler: Any) -> bool:
    if type(sampler) is SequentialSampler:
        return True
    return (
        type(sampler) is RandomSampler and not sampler.replacement and sampler._num_samples is None
    )
