"""What the start of an epoch tells the data: the epoch for the dataset's ``set_epoch``
(through wrappers), and the warnings when worker processes cannot see it (persistent
workers holding old copies) or start afresh after a resume.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from torch.utils.data import DataLoader

from scramjet.runtime.stacklevel import user_stacklevel


def set_dataset_epoch(loader: Any, dataset: Any, epoch: int) -> None:
    """Select ``epoch`` on the data's ``set_epoch`` (seeded augmentations draw anew).

    ``dataset`` is what the Trainer was given: a dataset, or a loader used as given. A
    DataLoader has no ``set_epoch`` of its own; its ``dataset`` gets the call then (worker
    processes started for the epoch take a copy of it with that epoch).
    Wrappers without one of their own (``Subset``, ``random_split``'s parts,
    ``ConcatDataset``, ...) pass it to what they wrap (``.dataset``, ``.datasets``).
    """
    seen: set[int] = set()
    selected: list[Any] = []

    def select(target: Any, depth: int) -> bool:
        if target is None or id(target) in seen or depth > 8:
            return False
        seen.add(id(target))
        if callable(getattr(target, "set_epoch", None)):
            target.set_epoch(epoch)
            selected.append(target)
            return True
        parts = getattr(target, "datasets", None)
        inner = [*parts] if isinstance(parts, list | tuple) else []
        inner.append(getattr(target, "dataset", None))
        return any([select(part, depth + 1) for part in inner])  # every part, not the first

    if not select(dataset, 0):
        select(getattr(loader, "dataset", None), 0)
    _warn_unseen_epoch(loader, selected)


def _warn_unseen_epoch(loader: Any, selected: list[Any]) -> None:
    """Say once when ``set_epoch`` cannot reach running persistent workers' copies."""
    running = isinstance(loader, DataLoader) and loader.persistent_workers
    if not running or getattr(loader, "_iterator", None) is None:
        return  # workers start after the call (or there are none): they copy the epoch
    unseen = [t for t in selected if not getattr(t, "epoch_in_shared_memory", False)]
    if not unseen or getattr(loader, "_scramjet_epoch_warned", False):
        return
    loader._scramjet_epoch_warned = True
    warnings.warn(
        f"{type(unseen[0]).__name__}.set_epoch() reaches only this process's copy of the "
        f"dataset: the DataLoader keeps persistent worker processes, which hold the copies "
        f"they started with, so they go on with the epoch they started in (the same "
        f"shuffle or augmentations every epoch). Pass persistent_workers=False, or keep "
        f"the epoch in shared memory (a torch.multiprocessing.Value or a shared tensor) and "
        f"set the class attribute epoch_in_shared_memory = True to silence this warning.",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )


def warn_fresh_workers(loader: Any, skipped: int, *, later_epoch: bool) -> None:
    """A resumed run's DataLoader workers are new processes: what they draw at random
    differs from the uninterrupted run's when they start at a batch other workers made
    there (the epoch's first ``skipped`` batches were skipped without being loaded), or
    when the uninterrupted run's workers persist across epochs (``persistent_workers``)
    and the run resumes after its first epoch."""
    if not isinstance(loader, DataLoader) or not loader.num_workers:
        return
    persistent = later_epoch and loader.persistent_workers
    if not (skipped or persistent):
        return
    where = (
        f"{skipped} batch(es) into the epoch, whose consumed samples are skipped without "
        f"being loaded, so the new worker processes start their random generators at the "
        f"next batch, where the uninterrupted run's workers had drawn for earlier batches"
        if skipped
        else "after the first epoch with persistent_workers=True, so the new worker "
        "processes start their random generators afresh, where the uninterrupted run's "
        "workers went on from the epochs before"
    )
    warnings.warn(
        f"resumed {where} (num_workers={loader.num_workers}). Random draws made in the "
        f"workers from here (random augmentations in __getitem__, a random collate_fn) "
        f"differ from the uninterrupted run's; the order of the samples is the same, and "
        f"so are the weights when the workers draw nothing. For exact draws, derive them "
        f"from the sample index and the epoch, or train with num_workers=0"
        f"{'' if persistent else ', or resume at an epoch boundary'}.",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )


class ReleasedOnError:
    """``with ReleasedOnError(batches, loader) as stream: for batch in stream: ...``: an
    epoch left by an exception (a preemption, a crash) shuts its DataLoader's worker
    processes down at once. Otherwise the loader's iterator lived on in the traceback until
    the process ended, where torch waited 5 s for each worker whose queue was already
    closed: a preempted run with 2 workers exited 10 s after saving, and 6 would pass the
    launcher's 30 s before its SIGKILL. An epoch that ends normally (or by ``break``)
    leaves persistent workers running for the next one."""

    def __init__(self, batches: Iterable[Any], loader: Any) -> None:
        self.iterator: Iterator[Any] = iter(batches)
        self.loader = loader

    def __enter__(self) -> Iterator[Any]:
        return self.iterator

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is None:
            return
        close = getattr(self.iterator, "close", None)
        if callable(close):  # a generator over the loader: its own cleanup runs now
            close()
        for iterator in (self.iterator, getattr(self.loader, "_iterator", None)):
            shutdown = getattr(iterator, "_shutdown_workers", None)
            if callable(shutdown):  # worker processes told to stop now
                shutdown()
        if isinstance(self.loader, DataLoader) and self.loader._iterator is not None:
            self.loader._iterator = None  # a later train() starts new persistent workers
