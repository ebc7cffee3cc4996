"""The order of the data: seeded, reproducible, resumable mid-epoch, sharded across ranks.

The training order is a pure function of (seed, epoch, rank), so a resumed run rebuilds
the epoch's order and *skips indices*, never batches of loaded data: resuming costs no
forward passes and no decoding of the skipped samples. :class:`DataOrder` owns that seed
for a Trainer and prepares each epoch's batches; the samplers of ``samplers.py`` produce
the indices.
Evaluation and prediction shard without padding (:class:`ShardSampler`),
:func:`gather_shards` puts gathered results back in dataset order, and :class:`Lockstep`
keeps ranks in step when every forward is a collective (FSDP).
"""

from __future__ import annotations

import itertools
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, cast

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler

from scramjet.runtime import distributed as dist
from scramjet.runtime.stacklevel import user_stacklevel
from scramjet.trainer._collate import loader_options
from scramjet.trainer._epoch_data import set_dataset_epoch, warn_fresh_workers
from scramjet.trainer.batch import PAD_VALUE
from scramjet.trainer.samplers import EpochSampler as EpochSampler
from scramjet.trainer.samplers import EvenShardBatches, explain_index_errors, read_past
from scramjet.trainer.samplers import ShardSampler as ShardSampler
from scramjet.trainer.samplers import SkipBatches as SkipBatches
from scramjet.trainer.samplers import SkipSampler as SkipSampler
from scramjet.trainer.samplers import safe_len as safe_len
from scramjet.trainer.samplers import shard_window_order as shard_window_order

T = TypeVar("T")


def batch_sampler_loader(
    dataset: Any, kwargs: Mapping[str, Any], name: str, **extra: Any
) -> DataLoader[Any] | None:
    """A DataLoader fed whole batches by the ``batch_sampler`` of ``kwargs``; None without.

    A batch sampler decides the batches, so the batch size and ``drop_last`` of the
    defaults are left out (a ``sampler`` next to it is an error that names the fix).
    """
    batch_sampler = kwargs.get("batch_sampler")
    if batch_sampler is None:
        return None
    if kwargs.get("sampler") is not None:
        raise ValueError(
            f"{name} holds both a batch_sampler and a sampler; a batch_sampler chooses the "
            f"samples of every batch itself. Pass one of the two (give your batch sampler "
            f"the sampler it should draw from)."
        )
    rest = {k: v for k, v in kwargs.items() if k not in _DECIDED_BY_BATCH_SAMPLER}
    wrapped = (
        batch_sampler if isinstance(batch_sampler, SkipBatches) else SkipBatches(batch_sampler)
    )
    data = "train_dataset" if name.startswith("train") else _EVAL_DATA
    return DataLoader(dataset, batch_sampler=wrapped, **loader_options(rest, data), **extra)


#: DataLoader settings a batch sampler decides (the Trainer's defaults set them).
_DECIDED_BY_BATCH_SAMPLER = ("batch_sampler", "batch_size", "drop_last", "shuffle", "sampler")


def pack_loader(
    dataset: Any, sampler: Sampler[int], kwargs: Mapping[str, Any]
) -> Iterable[Any] | None:
    """A pack's threaded batch loader in place of a DataLoader, or None.

    A :class:`~scramjet.data.PackedDataset` without a transform gives the same batches
    from ``dataset.loader(backend="threads")`` as from a DataLoader with the same sampler,
    read and decoded by threads of this process ahead of the loop instead of in it (a
    DataLoader with ``num_workers=0``) or in worker processes that hand every batch over.
    ``num_workers`` is the number of reading threads; 0 shares this machine's usable cores
    among the processes started on it (``LOCAL_WORLD_SIZE``). Any setting threads do not
    take (``collate_fn``, ``worker_init_fn``, ``persistent_workers``...) or a transform
    keeps the DataLoader.
    """
    reader = sys.modules.get("scramjet.data.reader")  # never imported: not a pack
    if reader is None or not isinstance(dataset, reader.PackedDataset):
        return None
    from scramjet.data._threads import THREAD_OPTIONS, usable_cores

    settings = {"batch_size", "num_workers", "drop_last", *THREAD_OPTIONS}
    if dataset.transform is not None or not kwargs.get("batch_size") or set(kwargs) - settings:
        return None

    threads = int(kwargs.get("num_workers") or 0)
    if threads == 0:
        threads = max(1, usable_cores() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
    loader: Iterable[Any] = dataset.loader(
        int(kwargs["batch_size"]), sampler=sampler, drop_last=bool(kwargs.get("drop_last")),
        num_workers=threads, backend="threads", pin_memory=kwargs.get("pin_memory"),
        prefetch_factor=kwargs.get("prefetch_factor"),
    )  # fmt: skip
    return loader


def yields_batches(source: object) -> bool:
    """Whether ``source`` already yields batches, to be used as the loader itself.

    True for a ``DataLoader`` and for an iterable that is not a dataset (a generator, an
    iterator, any object with ``__iter__`` but no ``__getitem__``/``__len__``). False for a
    map-style dataset (a ``Dataset`` or any sequence, lists included: its items are
    samples) and for an ``IterableDataset`` (it yields samples, batched by a DataLoader).
    """
    if isinstance(source, DataLoader):
        return True
    if isinstance(source, Dataset):
        return False
    return not (hasattr(source, "__getitem__") and hasattr(source, "__len__"))


def check_ready_loader(
    loader: object, name: str, *, shard: type[Sampler[int]] | None = None
) -> None:
    """Across processes, a loader the user built must give each rank its own share.

    Args:
        loader: what the user passed as ``name``.
        name: the argument, for the error message.
        shard: a sampler class the loader must use (prediction restores dataset order
            only from :class:`ShardSampler`); None accepts any per-rank sampler.

    Raises:
        ValueError: several processes run and the loader's sampler is not split by rank.
    """
    world = dist.get_world_size()
    if world == 1 or not isinstance(loader, DataLoader):
        return  # one process, or a generator: what each rank yields is the user's choice
    sampler = loader.sampler
    replicas = getattr(sampler, "num_replicas", 1)
    if replicas == world and (shard is None or isinstance(sampler, shard)):
        return
    expected = (
        f"scramjet.trainer.data_order.ShardSampler(dataset, {world}, rank)"
        if shard is not None
        else f"DistributedSampler(dataset) or EpochSampler(dataset, num_replicas={world}, rank=rank)"
    )
    raise ValueError(
        f"{name} is a DataLoader whose sampler ({type(sampler).__name__}) does not split the "
        f"data across the {world} processes, so every process would read every sample. Build "
        f"it with sampler={expected}, or pass the dataset itself and let the Trainer build "
        f"the loader."
    )


def check_predict_source(dataset: Any, world: int) -> None:
    """Across processes, ``predict`` needs data it can split by rank and put back in order.

    Raises:
        ValueError: ``dataset`` is an ``IterableDataset`` (also inside a DataLoader) or a
            generator: each process reads its own stream, so no dataset order exists.
    """
    inner = dataset.dataset if isinstance(dataset, DataLoader) else dataset
    if isinstance(inner, IterableDataset) or (
        yields_batches(dataset) and not isinstance(dataset, DataLoader)
    ):
        kind = "an IterableDataset" if isinstance(inner, IterableDataset) else "a generator"
        raise ValueError(
            f"predict() on {world} processes received {type(inner).__name__} ({kind}), a "
            f"stream that each process reads on its own, so its outputs cannot be put back "
            f"in one dataset order. Pass a map-style dataset instead, e.g. "
            f"trainer.predict(list(stream)) (every process then predicts its share and "
            f"gets all outputs in order), or predict the stream in a script that runs in "
            f"one process."
        )


def check_same_length(dataset: Any, name: str) -> None:
    """Across processes, check that every rank holds a dataset of the same length.

    A map-style dataset is one dataset that the samplers split by rank; ranks that built
    it differently (other files, another filter) would split it differently and run
    different numbers of steps, which ends in a collective mismatch that names no data.
    One small gather when a loader is built. Collective: every rank must call it.

    Raises:
        ValueError: the lengths differ; the message lists each rank's.
    """
    if dist.get_world_size() == 1:
        return
    lengths = dist.gather_object(safe_len(dataset))
    if len(set(lengths)) > 1:
        per_rank = ", ".join(f"rank {rank}: {n}" for rank, n in enumerate(lengths))
        raise ValueError(
            f"{name} has a different len() on each process ({per_rank}). Across processes "
            f"a map-style dataset is one dataset that the Trainer splits by rank, so every "
            f"process must build the same one: load the same files with the same filters "
            f"on every rank (or, for a stream of each rank's own, pass an IterableDataset)."
        )


def gather_shards(local: Any, num_samples: int) -> Any:
    """Gather every rank's :class:`ShardSampler` results and put them in dataset order.

    Rank ``r`` of ``W`` holds the results of samples ``r, r + W, ...``. Tensors come back
    as one tensor with ``num_samples`` rows; lists as one list; dicts key by key. In a
    single process ``local`` is returned as it is. Collective: every rank must call it.

    Raises:
        TypeError: ``local`` is neither a tensor, a list nor a dict of those.
        ValueError: the ranks' rows, together, are not ``num_samples`` (every rank alike).
    """
    world = dist.get_world_size()
    if world == 1:
        return local
    if isinstance(local, Mapping):
        return {key: gather_shards(value, num_samples) for key, value in local.items()}
    positions = torch.tensor(
        [i for r in range(world) for i in range(r, num_samples, world)], dtype=torch.long
    )
    if isinstance(local, torch.Tensor):
        gathered = dist.gather(local, pad_value=PAD_VALUE)  # [rank 0 rows, rank 1 rows...]
        _check_rows(len(gathered), num_samples, len(local) if local.dim() else 1)
        result = torch.empty_like(gathered)
        result[positions] = gathered
        return result
    if isinstance(local, list | tuple):
        parts = dist.gather_object(list(local))
        _check_rows(sum(len(part) for part in parts), num_samples, len(local))
        ordered: list[Any] = [None] * num_samples
        for position, item in zip(positions.tolist(), itertools.chain.from_iterable(parts)):
            ordered[position] = item
        return ordered
    raise TypeError(
        f"gather_shards needs a tensor, a list or a dict of those (one row per sample); "
        f"received {type(local).__name__}."
    )


def _check_rows(rows: int, num_samples: int, local: int) -> None:
    """Refuse results that are not one row per sample: they have no dataset order."""
    if rows != num_samples:
        world, rank = dist.get_world_size(), dist.get_rank()
        share = len(range(rank, num_samples, world))
        raise ValueError(
            f"The processes' outputs hold {rows} rows in all for {num_samples} samples "
            f"(rank {rank}: {local} rows for its {share} samples). Across processes, each sample's output is put back in "
            f"dataset order, so every output tensor or list needs one row per sample (its "
            f"first dimension). One value per batch (a mean, a loss) or rows flattened over "
            f"tokens have no such order: return per-sample outputs (reduction='none', keep "
            f"the batch dimension), or run it in one process."
        )


def _eval_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """An evaluation DataLoader's options, with a generator of its own: starting its
    iterator draws the workers' base seed from it, not from the global generator, which
    would move the training's dropout masks (a run with evaluation trained differently)."""
    out = loader_options(kwargs, _EVAL_DATA)
    if out.get("generator") is None:
        out["generator"] = torch.Generator()
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
        batches = self.batches
        if safe_len(getattr(batches, "dataset", None)):  # map-style: a short __getitem__
            batches = explain_index_errors(batches, batches, _EVAL_DATA)
        if not self.enabled:
            for item in batches:
                yield item, True
                if self._stop:
                    return
            return
        iterator = iter(batches)
        last: T | None = None
        have_last = False
        while True:
            batch: T | None
            try:
                batch, real = next(iterator), True
            except StopIteration:
                batch, real = last, False
            stuck = not real and not have_last
            flags = dist.reduce(
                torch.tensor([float(real), float(stuck), float(self._stop)]), "max", check=False
            )
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
            yield cast(T, batch), real  # a real batch, or the last one repeated


def even_end(batches: Iterable[T]) -> Iterator[T]:
    """Yield batches while every rank has one; all ranks stop at the first rank's end.

    Streams of unknown length may hold different numbers of batches on different ranks;
    a rank that trained on while another had stopped would wait forever in the gradient
    all-reduce (or abort inside the collective library). One tiny all-reduce per batch
    decides, on every rank alike, whether all have a batch; the extra batches of the
    longer streams are left unread. In one process the batches pass through unchanged.
    """
    if not dist.is_distributed():
        yield from batches
        return
    iterator = iter(batches)
    while True:
        try:
            batch, have = next(iterator), 1.0
        except StopIteration:
            batch, have = None, 0.0
        if float(dist.reduce(torch.tensor([have]), "min", check=False)[0]) == 0.0:
            return
        yield cast(T, batch)


def _loader_batch_size(loader: Any, sampler: Any) -> int | None:
    """Samples per batch of ``loader``: its ``batch_size``, or, for a DataLoader with
    ``batch_size=None`` fed whole batches by a batch sampler (``PackedDataset.loader``
    with worker processes, or ``batch_sampler=``), that sampler's."""
    for source in (loader, sampler, getattr(loader, "batch_sampler", None)):
        size = getattr(source, "batch_size", None)
        if isinstance(size, int) and size > 0:
            return size
    return None


class DataOrder:
    """A Trainer's training-data order: one seed, and each epoch's batches derived from it.

    The seed is the Trainer's ``seed`` when given, else drawn once per run from torch's
    global RNG on rank 0 and shared (so ``torch.manual_seed(...)`` before ``train()``
    makes it reproducible). Every epoch's order, and the DataLoader workers' seeds,
    follow (seed, epoch, rank). The seed is what a checkpoint keeps
    (:meth:`state_dict`), so a resumed run sees the same order.

    Example:
        >>> order = DataOrder(seed=3)
        >>> loader = order.train_loader(list(range(6)), {"batch_size": 2}, shuffle=True)
        >>> batches, total = order.epoch_batches(
        ...     loader, list(range(6)), epoch=0, skip=1, batch_size=2)
        >>> total, len(list(batches))  # the epoch has 3 batches; the first was consumed
        (3, 2)
    """

    def __init__(self, seed: int | None = None) -> None:
        self.requested_seed = seed
        self._seed: int | None = None
        self._sampler: EpochSampler | None = None  # the sampler this order made, kept in sync
        self._batch_size = 0  # the loader's batch size per process, for state_dict
        self._resumed: dict[str, int] | None = None  # how a checkpoint's epoch was consumed
        self._base = (0, 0)  # (global positions, batches of ours) skipped when the epoch began
        self._short_warned = False  # the loader ended before its length once this run
        self._restarted = False  # resumed: the next epoch that runs batches has new workers

    @property
    def seed(self) -> int:
        """The run's seed (drawn on first use when none was requested)."""
        if self._seed is None:
            if self.requested_seed is not None:
                self._seed = int(self.requested_seed)
            else:  # drawn from torch's RNG, so torch.manual_seed(...) makes it reproducible
                drawn = int(torch.randint(0, 2**31 - 1, ()).item())
                self._seed = int(dist.gather_object(drawn)[0])  # rank 0's draw, on every rank
        return self._seed

    def new_run(self) -> None:
        """Forget the seed of the previous run (a new one is taken at the next use)."""
        self._seed, self._sampler, self._short_warned = None, None, False
        self._restarted = False

    def train_loader(self, dataset: Any, kwargs: dict[str, Any], *, shuffle: bool) -> Iterable[Any]:
        """A DataLoader over ``dataset`` whose order follows this seed.

        A map-style dataset gets an :class:`EpochSampler` (this rank's share, reshuffled
        every epoch) unless ``kwargs`` holds a sampler, which is then wrapped in a
        :class:`SkipSampler` so that a resume can skip its first indices. An iterable
        dataset gets a generator of its own, so starting an epoch never draws from the
        global RNG (whose state a checkpoint restores). A pack gets its threaded batch
        loader instead of a DataLoader where that reads the same batches (:func:`pack_loader`).
        """
        kwargs = dict(kwargs)
        generator = kwargs.pop("generator", None) or torch.Generator()
        generator.manual_seed(self.seed + dist.get_rank())
        if isinstance(dataset, IterableDataset):
            return DataLoader(
                dataset, generator=generator, **loader_options(kwargs, "train_dataset")
            )
        batched = batch_sampler_loader(
            dataset, kwargs, "train_dataloader_kwargs", generator=generator
        )
        if batched is not None:
            return batched
        sampler: Sampler[int] | None = kwargs.pop("sampler", None)
        if sampler is None:
            check_same_length(dataset, "train_dataset")
            sampler = self._sampler = EpochSampler(
                dataset,
                shuffle=shuffle,
                seed=self.seed,
                num_replicas=dist.get_world_size(),
                rank=dist.get_rank(),
                drop_last=bool(kwargs.get("drop_last")),
            )
        elif not isinstance(sampler, EpochSampler | SkipSampler):
            sampler = SkipSampler(sampler)
        threaded = pack_loader(dataset, sampler, kwargs)
        if threaded is not None:
            return threaded
        kwargs = loader_options(kwargs, "train_dataset")
        return DataLoader(dataset, sampler=sampler, generator=generator, **kwargs)

    @staticmethod
    def eval_loader(dataset: Any, kwargs: dict[str, Any]) -> Iterable[Any]:
        """A loader over ``dataset`` for evaluation or prediction: each rank takes its
        :class:`ShardSampler` share (``r, r + W, ...``, no padding) in dataset order."""
        if isinstance(dataset, IterableDataset):
            return DataLoader(dataset, **_eval_options(kwargs))
        if kwargs.get("batch_sampler") is not None and dist.get_world_size() > 1:
            raise ValueError(
                f"the evaluation dataloader kwargs hold a batch_sampler "
                f"({type(kwargs['batch_sampler']).__name__}); across "
                f"{dist.get_world_size()} processes evaluation and prediction give each "
                f"process its share (ShardSampler) and gather the results in dataset order, "
                f"which a batch sampler of your own would undo. Leave it out there, or "
                f"evaluate in one process."
            )
        batched = batch_sampler_loader(dataset, kwargs, "the evaluation dataloader kwargs")
        if batched is not None:
            return batched
        sampler = kwargs.pop("sampler", None)
        if sampler is None:
            check_same_length(dataset, "the evaluation/prediction dataset")
            sampler = ShardSampler(dataset, dist.get_world_size(), dist.get_rank())
        threaded = pack_loader(dataset, sampler, kwargs)  # a pack: its threaded batch loader
        if threaded is not None:
            return threaded
        options = _eval_options(kwargs)
        size = options.get("batch_size", 1)
        if isinstance(sampler, ShardSampler) and sampler.num_replicas > 1 and size:
            # every rank the same number of steps (unless drop_last asks to drop a batch)
            rest = {k: v for k, v in options.items() if k not in ("batch_size", "drop_last")}
            if not options.get("drop_last"):
                return DataLoader(dataset, batch_sampler=EvenShardBatches(sampler, size), **rest)
        loader = DataLoader(dataset, sampler=sampler, **options)
        # The largest share (every rank's decision alike): below one batch, none gives one.
        most = safe_len(sampler)
        if isinstance(sampler, ShardSampler):
            most = -(-safe_len(dataset) // dist.get_world_size())
        if loader.drop_last and 0 < most < (loader.batch_size or 0):
            raise ValueError(
                f"{_EVAL_DATA} gives no batch: it has {most} sample(s) per process, the "
                f"batch size is {loader.batch_size} and drop_last=True drops a batch smaller "
                f"than that, so eval_loss_epoch would be NaN. Leave drop_last out of the "
                f"evaluation dataloader kwargs, or lower the batch size."
            )
        return loader

    def epoch_batches(
        self, loader: Iterable[Any], dataset: Any, *, epoch: int, skip: int, batch_size: int = 1
    ) -> tuple[Iterable[Any], int]:
        """This epoch's batches after the first ``skip`` ones, and the epoch's length.

        See :meth:`_epoch_batches`. In one process, data of unknown length that yields no
        batch at all in an epoch it starts from the beginning raises ``ValueError`` when
        it ends: the epoch would have trained nothing and recorded a NaN loss.
        """
        batches, n_batches = self._epoch_batches(
            loader, dataset, epoch=epoch, skip=skip, batch_size=batch_size
        )
        if self._restarted:
            skipped = skip if batches is loader else 0  # indices skipped, none loaded
            # an epoch the checkpoint left with nothing to run: the next one is the first
            self._restarted = bool(skipped) and safe_len(loader) == 0
            if not self._restarted:
                warn_fresh_workers(loader, skipped, later_epoch=epoch > 0)
        if safe_len(getattr(dataset, "dataset", dataset)):  # map-style: a short __getitem__
            batches = explain_index_errors(batches, dataset, "train_dataset")
        if not n_batches and not skip and dist.get_world_size() == 1:
            batches = _not_empty(batches, dataset, epoch)
        elif n_batches and not self._short_warned:
            batches = self._warn_if_short(batches, n_batches, skip)
        return batches, n_batches

    def _warn_if_short(self, batches: Iterable[T], n_batches: int, skip: int) -> Iterator[T]:
        """``batches``, warning once per run when they end before the ``n_batches`` that
        the loader's length promised (a stopped epoch never reaches the end: no warning)."""
        count = skip
        for batch in batches:
            count += 1
            yield batch
        if count < n_batches and not self._short_warned:
            self._short_warned = True
            warnings.warn(
                f"the training data yielded fewer batches than its length says: {count} "
                f"in this epoch, where len() promised {n_batches}. Everything computed from "
                f"the length is too long: the number of epochs that max_num_train_steps "
                f"makes (the run ends with fewer updates than asked for), "
                f"TOTAL_UPDATE_STEPS and other scheduler placeholders (the schedule never "
                f"reaches its end), the progress bar's total. Make __len__ of the dataset "
                f"(or of the sampler) return what it yields, or remove it so that the "
                f"length is treated as unknown.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )

    def _epoch_batches(
        self, loader: Iterable[Any], dataset: Any, *, epoch: int, skip: int, batch_size: int = 1
    ) -> tuple[Iterable[Any], int]:
        """This epoch's batches after the first ``skip`` ones, and the epoch's length.

        Selects the epoch's order on the sampler (``set_epoch``) and on the dataset when it
        has ``set_epoch`` (for a given DataLoader, on its ``dataset``: seeded augmentations
        draw anew every epoch), skips consumed indices where the sampler can
        (``set_start``) and otherwise reads past ``skip`` batches without running them,
        and reseeds every DataLoader's randomness (its
        generator: workers' seeds; a random sampler's generator: the shuffled order) for
        (seed, epoch, rank). A DataLoader the user built is reseeded too: starting an epoch
        then draws nothing from torch's global RNG, whose state a checkpoint restores
        mid-epoch, so a resumed run sees the same order; one that shuffles with the global
        generators starts the epoch with them seeded (:class:`SkipSampler`, :func:`read_past`).
        Skipped batches become skipped indices at the loader's own batch size (its batch
        sampler's for a DataLoader fed whole batches, ``batch_size`` when it has none).
        The length counts the skipped batches; 0 means unknown.
        """
        sampler: Any = getattr(loader, "sampler", None)
        batch_sampler = getattr(loader, "batch_sampler", None)
        if isinstance(batch_sampler, SkipBatches):  # the user's batches: skipped as batches
            batch_sampler.set_epoch(epoch)
            set_dataset_epoch(loader, dataset, epoch)
            self._batch_size, self._base = batch_sampler.batch_size or batch_size, (0, skip)
            batch_sampler.set_start(skip)
            batch_sampler.set_draw_seed(self._draw_seed(epoch))
            self._resumed = None
            if isinstance(loader, DataLoader):
                self._reseed(loader, batch_sampler, epoch)
            n_batches = safe_len(loader)
            return loader, (skip + n_batches if n_batches else 0)
        if self._sampler is not None and sampler is self._sampler:
            sampler.seed = self.seed  # a restored seed applies to the order made before it
        self._adopt_drawn_seed(loader)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        set_dataset_epoch(loader, dataset, epoch)
        per_batch = _loader_batch_size(loader, sampler) or batch_size
        self._batch_size = per_batch
        self._base = (skip * per_batch * dist.get_world_size(), skip)
        if isinstance(sampler, EpochSampler) and skip and self._resumed is not None:
            # saved by a run with (maybe) another number of processes: skip what *all* of
            # its processes consumed in the global order, split the rest among ours
            saved = self._resumed
            batches = skip - saved["skip_base"]
            consumed = (
                saved["consumed_base"]
                + batches * (saved["batch_size"] or per_batch) * (saved["world_size"])
            )
            sampler.set_consumed(consumed)
            self._base = (consumed, skip)
        elif hasattr(sampler, "set_start"):  # in samples: the loader's own batch size counts
            # (train_dataloader_kwargs or a ready DataLoader may set another than batch_size)
            sampler.set_start(skip * per_batch)
        if isinstance(sampler, SkipSampler):
            sampler.set_draw_seed(self._draw_seed(epoch))
        self._resumed = None  # later epochs start from their beginning
        if isinstance(loader, DataLoader):
            self._reseed(loader, sampler, epoch)
        n_batches = safe_len(loader)
        if hasattr(sampler, "set_start"):  # the loader holds only the batches still to come
            return loader, (skip + n_batches if n_batches else 0)
        if isinstance(loader, DataLoader):  # a stream, or a ready loader's own order
            return read_past(loader, skip, self._draw_seed(epoch)), n_batches
        if skip:  # nothing to skip indices with (e.g. a generator): read past them
            return read_past(loader, skip), n_batches
        return loader, n_batches

    def _adopt_drawn_seed(self, loader: Any) -> None:
        """A pack loader's order whose seed was drawn from torch's RNG (``ds.loader(
        shuffle=True)`` without ``generator=``) follows the run's seed instead, which a
        checkpoint keeps: a run resumed in a new process reads the same order."""
        order = getattr(loader, "sampler", None)
        for _ in range(3):  # the loader's sampler, or inside its batch sampler
            if order is None or getattr(order, "seed_drawn", False):
                break
            order = getattr(order, "sampler", None)
        if order is not None and getattr(order, "seed_drawn", False):
            order.seed = self.seed

    def _draw_seed(self, epoch: int) -> int:
        """The seed a user's sampler draws its epoch's order with when it shuffles with
        the global generators (see :class:`SkipSampler`)."""
        return self.seed + 1_000_003 * epoch + dist.get_rank() + 7_919

    def _reseed(self, loader: DataLoader[Any], sampler: Any, epoch: int) -> None:
        seed = self.seed + 1_000_003 * epoch + dist.get_rank()
        if loader.generator is None:
            loader.generator = torch.Generator()
        loader.generator.manual_seed(seed)
        # The user's random sampler (RandomSampler, WeightedRandomSampler...), also inside
        # our SkipSampler / SkipBatches or a BatchSampler, and inside the batch sampler of
        # a ready DataLoader (whose own ``sampler`` is then a placeholder): its draws
        # follow the run's seed, not torch's global RNG, which a checkpoint restores
        # mid-epoch.
        seen: set[int] = set()
        for chain in (sampler, getattr(loader, "batch_sampler", None)):
            for depth in range(4):
                if chain is None or chain is self._sampler or id(chain) in seen:
                    break
                seen.add(id(chain))
                if hasattr(chain, "generator"):
                    if chain.generator is None:
                        chain.generator = torch.Generator()
                    chain.generator.manual_seed(seed + 1 + depth)
                chain = getattr(chain, "sampler", None) or getattr(chain, "batch_sampler", None)

    def state_dict(self) -> dict[str, Any]:
        """The seed, for a checkpoint (0 when the run's loaders never needed one)."""
        return {"seed": self._seed if self._seed is not None else 0}

    def resume_state(self) -> dict[str, Any]:
        """:meth:`state_dict` plus how the current epoch is being consumed: the number of
        processes, the per-process batch size, and the global positions and batches
        already skipped when the epoch began. Given to :meth:`load_state_dict`, a run on
        another number of processes skips exactly the samples this run has seen."""
        return {
            **self.state_dict(),
            "world_size": dist.get_world_size(),
            "batch_size": self._batch_size,
            "consumed_base": self._base[0],
            "skip_base": self._base[1],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take the seed of a checkpoint (the next epoch's order follows it).

        With ``world_size`` in ``state``, the resumed epoch skips the positions of its
        global order that the saving run consumed (``consumed_base`` when its epoch began,
        plus its batches since then x ``batch_size`` x ``world_size``), and the processes
        of this run share what is left; without it (older checkpoints), each process skips
        its own consumed batches, as saved by the same number of processes.
        """
        self._seed = int(state["seed"])
        self._restarted = True
        if "world_size" in state:
            keys = ("world_size", "batch_size", "consumed_base", "skip_base")
            self._resumed = {k: int(state.get(k) or 0) for k in keys}


#: What evaluation and prediction loaders call their data in errors.
_EVAL_DATA = "the evaluation/prediction dataset"


def _not_empty(batches: Iterable[T], dataset: Any, epoch: int) -> Iterator[T]:
    """``batches``, raising at their end if there was none (see ``epoch_batches``)."""
    empty = True
    for batch in batches:
        empty = False
        yield batch
    if empty:
        again = (
            " It yielded batches in an earlier epoch, so it does not start over: its "
            "__iter__ must return a new iterator every time it is called (e.g. be a "
            "generator function), not one made once in __init__."
            if epoch
            else ""
        )
        raise ValueError(
            f"train_dataset ({type(dataset).__name__}, of unknown length) yielded no batch in "
            f"epoch {epoch + 1}, so the epoch trained nothing and its loss would be NaN.{again} "
            f"Check the stream's source (path, filter, shard), and that it holds at least "
            f"one full batch when drop_last=True."
        )


def warn_length_fell_short(length: int, accum: int, loader: Any = None) -> None:
    """The training loader yields more batches than ``len()`` said (an IterableDataset's
    ``__len__`` is only a hint to the DataLoader; a sampler may say less than it yields)."""
    windows = f" in windows of {accum} from there" if accum > 1 else ""
    workers = loader.num_workers if isinstance(loader, DataLoader) else 0
    if workers > 1 and isinstance(loader.dataset, IterableDataset):
        cause = (
            f"With num_workers={workers}, each worker batches its own share of the "
            f"IterableDataset, so each worker's last batch can be partial and an epoch can "
            f"hold up to {workers - 1} more batches than len(dataset) / batch_size. That holds "
            f"only if __iter__ splits the samples among the workers (by "
            f"torch.utils.data.get_worker_info()): one that does not has every worker yield "
            f"all of them, so each sample is trained {workers} times per epoch. To make them "
            f"agree, split the samples so each worker's share is a multiple of the batch "
            f"size, or use num_workers=1 (or 0), or remove __len__ so that the length is "
            f"treated as unknown."
        )
    else:
        cause = (
            "Make __len__ of the dataset (or of the sampler) return what it yields, or "
            "remove it so that the length is treated as unknown."
        )
    warnings.warn(
        f"the training data yields more batches than its length says ({length} batches per "
        f"epoch): the extra batches are trained too{windows}, but values computed from the "
        f"length (TOTAL_UPDATE_STEPS and other scheduler placeholders, the progress bar's "
        f"total) are short. {cause}",
        RuntimeWarning,
        stacklevel=5,
    )
