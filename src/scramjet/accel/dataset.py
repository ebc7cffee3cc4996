"""``accelerate_dataset`` / ``CachedDataset``: decode each sample once, serve it from RAM.

The cache lives in a private directory (``/dev/shm`` when available) that every DataLoader
worker opens: one copy for all workers, with fork or spawn, persistent or not. Samples of any
structure are stored (tensors, NumPy arrays, scalars, strings, nested containers). The memory
tier holds at most ``max_memory_size`` bytes; further samples spill to a directory on disk
(``spill=True``, the default) or are not cached (``spill=False``). ``preloaded_data``
preloaders (processes on Linux, see :mod:`scramjet.accel._preload`) decode ahead of the loop
from the first epoch on and end once the cache is complete. ``transform`` runs after the
cache, so random augmentations stay random.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset

from scramjet.accel._preload import start_preloaders
from scramjet.accel._probe import _attributes_kept, _nested_datasets, probe_deterministic
from scramjet.accel._store import (
    DISK,
    EMPTY,
    MEM,
    NONE,
    CacheWarning,
    SharedStore,
    decode,
    encode,
)
from scramjet.runtime.stacklevel import user_stacklevel

T = TypeVar("T")
_CLAIM_WAIT_S = 30.0


class _Cache:
    """Per-dataset cache logic over a :class:`SharedStore` (picklable; attaches on load)."""

    def __init__(
        self,
        n: int,
        preloaded_data: int,
        max_memory_size: float | None,
        spill: bool,
        cache_dir: str | None,
    ) -> None:
        budget = _validate(preloaded_data, max_memory_size, spill)
        if cache_dir is not None and not os.path.isdir(cache_dir):
            raise ValueError(
                f"cache_dir={cache_dir!r} is not an existing folder ("
                + ("it is a file" if os.path.exists(cache_dir) else "it does not exist")
                + "); create it, or pass cache_dir=None for the default RAM folder (/dev/shm)"
            )
        self.n, self.preloaded_data, self.budget = n, preloaded_data, budget
        self.spill, self.cache_dir = spill, cache_dir
        self._attach(SharedStore.create(n, spill, cache_dir, budget))
        atexit.register(self._finalizer)
        self._init_process_state()

    def _attach(self, store: SharedStore | None) -> None:
        """Use a store this process created (None: no folder had room, nothing is cached)."""
        self.store = store
        self._finalizer = weakref.finalize(self, _destroy_if_owner, store, os.getpid())

    def _init_process_state(self) -> None:
        self._started_pid = -1
        self._complete = False
        self.warned_grown = False  # a dataset that grew past n: warned about once
        self._warned = False
        self._threads: list[threading.Thread] = []

    def __getstate__(self) -> dict[str, Any]:
        keep = ("n", "preloaded_data", "budget", "spill", "cache_dir")
        state = {k: self.__dict__[k] for k in keep}
        store = self.store
        state["root"] = store.root if store is not None else None
        state["spill_dir"] = store.spill_dir if store is not None else None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        root, spill_dir = state.pop("root"), state.pop("spill_dir")
        self.__dict__.update(state)
        store = None if root is None else SharedStore(root, spill_dir, owner=False)
        if store is None or store.exists():
            self.store = store
        else:  # the creating process is gone: start a fresh cache
            self._attach(SharedStore.create(self.n, self.spill, self.cache_dir, self.budget))
        self._init_process_state()

    def stats(self) -> dict[str, int]:
        if self.store is None:
            return dict.fromkeys(_STAT_NAMES, 0) | {"samples": self.n}
        states = self.store.states()
        mem, disk = self.store.usage()
        return {
            "samples": self.n,
            "in_memory": int((states == MEM).sum()),
            "on_disk": int((states == DISK).sum()),
            "memory_bytes": mem,
            "disk_bytes": disk,
        }

    def is_complete(self) -> bool:
        """True once every sample has its final place; remembered, so later reads are
        one array lookup and a read, with no lock and no background work."""
        if not self._complete and self.store is not None and self.store.complete():
            self._complete = True
        return self._complete

    def _removed(self) -> bool:
        """Whether the creating process deleted the files (``close_cache()``) under this
        process (a DataLoader worker, a copy); if so, reads go uncached from now on."""
        store = self.store
        if store is None:
            return True
        if not store.removed() and store.exists():
            return False
        self.store = None
        store.detach()
        return True

    def get(self, i: int, load: Callable[[int], Any]) -> Any:
        store = self.store
        if store is None:
            return load(i)
        try:
            if self._complete or self.is_complete():
                blob = None if store.removed() else store.get(i)
                if blob is not None:
                    return decode(blob)
                self._removed()  # closed by its creator: let go of the files
                return load(i)
            self._ensure_preload(load)
            return self._get_or_wait(i, load)
        except OSError:
            if not self._removed():
                raise
        return load(i)

    def get_many(self, indices: list[int], load: Callable[[int], Any]) -> list[Any]:
        try:
            return self._get_many(indices, load)
        except OSError:
            if not self._removed():
                raise
        return [load(i) for i in indices]

    def _get_many(self, indices: list[int], load: Callable[[int], Any]) -> list[Any]:
        store = self.store
        if store is None or self._complete or self.is_complete():
            return [self.get(i, load) for i in indices]
        self._ensure_preload(load)
        if self.preloaded_data > 0 and len(indices) > 1:
            # Preloaders take these from the end of the batch while this reader works from
            # the front, so the batch is ready sooner and nothing is decoded twice.
            store.post_hints([i for i in indices if store.state(i) == EMPTY])
        samples: list[Any] = [None] * len(indices)
        waiting = []
        for k, i in enumerate(indices):
            blob = store.get(i)
            if blob is not None:
                samples[k] = decode(blob)
            elif store.state(i) == NONE:
                samples[k] = load(i)
            elif store.try_claim(i):
                samples[k] = self.store_one(i, load)[0]
            else:  # being decoded elsewhere: read the rest first, then wait for it
                waiting.append(k)
        for k in waiting:
            samples[k] = self._get_or_wait(indices[k], load)
        return samples

    def _get_or_wait(self, i: int, load: Callable[[int], Any]) -> Any:
        store, deadline, tries = self.store, time.monotonic() + _CLAIM_WAIT_S, 0
        if store is None:
            return load(i)
        while True:
            blob = store.get(i)
            if blob is not None:
                return decode(blob)
            state = store.state(i)
            if state == NONE:
                return load(i)  # over the memory budget and not spilled: not cached
            # A claim is retried at once on EMPTY and now and then on CLAIMED: try_claim
            # takes a claim back from a claimer that died.
            if (state == EMPTY or tries % 64 == 63) and store.try_claim(i):
                return self.store_one(i, load)[0]
            if time.monotonic() > deadline:
                return load(i)  # a stuck claimer: load without storing
            if tries % 64 == 63 and self._removed():
                return load(i)  # closed by its creator: nobody will store it
            tries += 1
            time.sleep(0.0005)

    def store_one(self, i: int, load: Callable[[int], Any]) -> tuple[Any, int]:
        """Decode claimed index ``i`` and store it; returns the sample and its tier."""
        store = self.store
        if store is None:
            return load(i), NONE
        try:
            sample = load(i)
        except BaseException:
            try:
                store.release(i)
            except OSError:
                if not self._removed():
                    raise
            raise
        try:
            blob = encode(sample)
        except Exception as exc:  # not picklable: served uncached, decoded on every read
            self._not_stored(store, i, sample, exc)
            return sample, NONE
        try:
            return sample, store.put(i, blob)
        except OSError:
            if not self._removed():
                raise
        return sample, NONE

    def _not_stored(self, store: SharedStore, i: int, sample: Any, exc: Exception) -> None:
        try:
            store.skip(i)
        except OSError:
            if not self._removed():
                raise
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"sample {i} (a {type(sample).__name__}) cannot be cached: pickling it failed "
                f"with {type(exc).__name__}: {exc}. Samples that cannot be pickled are not "
                "cached and are decoded on every read. To cache them, return picklable values "
                "from __getitem__ (tensors, NumPy arrays, numbers, strings, containers of them).",
                CacheWarning,
                stacklevel=user_stacklevel(),
            )

    def _ensure_preload(self, load: Callable[[int], Any]) -> None:
        if self._started_pid == os.getpid() or self.preloaded_data <= 0 or self.store is None:
            return
        self._started_pid = os.getpid()
        self._threads = start_preloaders(self, self.store, load, self.preloaded_data)

    def close(self) -> None:
        finalizer = self.__dict__.get("_finalizer")
        if finalizer is not None:
            finalizer()
        # The files are gone (or, in a worker, no longer this process's to use): later reads
        # decode from the dataset, uncached, instead of failing on a missing folder.
        self.store = None


_STAT_NAMES = ("samples", "in_memory", "on_disk", "memory_bytes", "disk_bytes")


def _destroy_if_owner(store: SharedStore | None, pid: int) -> None:
    # Forked DataLoader workers inherit this finalizer; only the creating process deletes.
    if store is not None and os.getpid() == pid:
        store.destroy()


def _validate(preloaded_data: int, max_memory_size: float | None, spill: bool) -> int | None:
    """Check the settings; returns ``max_memory_size`` as an int (``4e9`` is 4000000000)."""
    if (
        isinstance(preloaded_data, bool)
        or not isinstance(preloaded_data, int)
        or preloaded_data < 0
    ):
        raise ValueError(
            f"preloaded_data must be an int >= 0 (background preloaders), got {preloaded_data!r}"
        )
    if not isinstance(spill, (bool, np.bool_)):
        raise TypeError(
            f"spill must be True (samples beyond max_memory_size go to disk) or False (they "
            f"are not cached), got {type(spill).__name__} {spill!r}"
        )
    if max_memory_size is not None and max_memory_size == 0 and not spill:
        raise ValueError(
            "max_memory_size=0 with spill=False caches nothing: no sample may stay in RAM and "
            "none may go to disk. Pass spill=True for a cache on disk only, a max_memory_size "
            "above 0 for one in RAM, or use the dataset without CachedDataset."
        )
    if max_memory_size is None:
        return None
    whole = isinstance(max_memory_size, (int, np.integer)) or (
        isinstance(max_memory_size, (float, np.floating)) and float(max_memory_size).is_integer()
    )
    if isinstance(max_memory_size, bool) or not whole or max_memory_size < 0:
        raise ValueError(
            f"max_memory_size must be a whole number of bytes >= 0 or None (no limit), got "
            f"{max_memory_size!r}; e.g. max_memory_size=2 * 1024**3"
        )
    return int(max_memory_size)


def _check_transform(transform: object) -> None:
    """``transform`` must be None or one callable (a list of them is a common slip)."""
    if transform is not None and not callable(transform):
        raise TypeError(
            f"transform must be a callable (sample -> sample) or None, got "
            f"{type(transform).__name__} {transform!r:.80}. To apply several, chain them in "
            "one callable: transform=lambda s: crop(flip(s)) (or torchvision's "
            "transforms.Compose([...]))."
        )


def _position(index: Any) -> int | None:
    """``index`` as an int when it names one sample: an int, NumPy integer or 0-d integer
    tensor. A bool (``True`` is an int to Python, but a mask to a tensor) or bool tensor is
    None: it is passed to the dataset as it is, uncached, so it means what it means there."""
    if isinstance(index, torch.Tensor):
        if index.ndim != 0 or index.dtype.is_floating_point or index.dtype.is_complex:
            return None
        return None if index.dtype == torch.bool else int(index)
    if isinstance(index, int | np.integer) and not isinstance(index, bool | np.bool_):
        return int(index)
    return None


def _normalise(index: Any, n: int, length: Callable[[], int]) -> int | None:
    """The cached position of ``index`` (an int, NumPy integer or 0-d integer tensor, as
    samplers and ``Subset`` indices give), or None when it is not one of the ``n`` cached
    ones. A negative index counts from the dataset's current end (``length()``); an index
    past that end is not cached (the dataset raises its own error, as uncached), so a
    dataset that shrank never serves a stale sample."""
    i = _position(index)
    if i is None:
        return None
    current = length()
    i = i + current if i < 0 else i
    return i if 0 <= i < min(n, current) else None


class _CachingMixin:
    """Shared by :class:`CachedDataset` and classes made by :func:`accelerate_dataset`."""

    _scramjet_cache: _Cache
    _scramjet_transform: Callable[[Any], Any] | None
    _scramjet_getitem: Callable[..., Any]  # the caching __getitem__ of the class that set it

    def _raw_item(self, index: int) -> Any:
        raise NotImplementedError

    def _length(self) -> int:
        return len(self)  # type: ignore[arg-type]  # both users define __len__

    def _source_name(self) -> str:
        """The class whose ``__getitem__`` decodes (named in the probe's warning)."""
        return type(self).__name__

    def _probe(self) -> bool:
        """:func:`probe_deterministic` on index 0, leaving the dataset's attributes (and the
        wrapped dataset's) as they were. Sample 0 that cannot be read (a dataset keyed by
        names, a damaged first file) is no error here, where the plain dataset raises only
        when that sample is read: the probe is skipped, with a warning."""
        with _attributes_kept(_nested_datasets(self)):
            try:
                return probe_deterministic(self._raw_item)
            except Exception as error:  # the user's __getitem__ may raise anything
                warnings.warn(
                    f"{self._source_name()}[0] raised {type(error).__name__}: {error}; so "
                    "whether __getitem__ is random could not be checked, and caching goes "
                    "on unchecked. If it draws random augmentations, move them to "
                    "transform=..., which runs after the cache; pass probe=False to skip "
                    "this check.",
                    CacheWarning,
                    stacklevel=user_stacklevel(),
                )
                return True

    def _setup_cache(self, n: int, settings: dict[str, Any]) -> None:
        settings = dict(settings)
        self._scramjet_transform = settings.pop("transform", None)
        _check_transform(self._scramjet_transform)
        probe = settings.pop("probe", True)
        if probe and n > 0 and not self._probe():
            warnings.warn(
                f"{self._source_name()}.__getitem__ is random: it returned different values "
                "for the same index, or drew from the global random generators (torch, "
                "NumPy, random) on each call; caching would freeze that randomness (e.g. "
                "random augmentations) at its first draw. Move random transforms to "
                "transform=..., which runs after the cache, or pass probe=False if this is "
                "intended.",
                CacheWarning,
                stacklevel=user_stacklevel(),
            )
        self._scramjet_cache = _Cache(n, **settings)

    def _ready_cache(self) -> Any:
        """The cache; built now if its building waited for a subclass's ``__init__``."""
        pending = self.__dict__.pop("_scramjet_pending", None)
        if pending is not None:
            self._setup_cache(self._length(), pending)
        return self.__dict__.get("_scramjet_cache")

    def _cached_item(self, index: Any) -> Any:
        cache = self._ready_cache()
        if cache is None:  # called from the class's own __init__ (e.g. to read a shape)
            fn = self.__dict__.get("_scramjet_transform")
            sample = self._raw_item(index)
            return sample if fn is None else fn(sample)
        i = _normalise(index, cache.n, self._length)
        if i is None:
            self._warn_if_grown(index, cache)
        sample = self._raw_item(index) if i is None else cache.get(i, self._raw_item)
        fn = self._scramjet_transform
        return sample if fn is None else fn(sample)

    def _cached_items(self, indices: list[Any]) -> list[Any]:
        getitem = getattr(type(self), "__getitem__")  # noqa: B009  (the class's, unbound)
        if getitem is not type(self)._scramjet_getitem:
            # A subclass wrote its own __getitem__: the DataLoader's batched read must give
            # what indexing gives (its override may call super().__getitem__, still cached).
            return [getitem(self, i) for i in indices]
        cache = self._ready_cache()
        if cache is None:
            return [self._cached_item(i) for i in indices]
        norm = [_normalise(i, cache.n, self._length) for i in indices]
        if any(i is None for i in norm):
            return [self._cached_item(i) for i in indices]
        samples = cache.get_many([int(i) for i in norm if i is not None], self._raw_item)
        fn = self._scramjet_transform
        return samples if fn is None else [fn(s) for s in samples]

    def _warn_if_grown(self, index: Any, cache: _Cache) -> None:
        """Once per cache: an index the dataset holds now but did not hold when the cache
        was made (it grew: a list appended to) is read uncached; say so, and how to fix it."""
        i = None if cache.warned_grown else _position(index)
        if i is None:
            return
        current = self._length()
        if cache.n <= (i + current if i < 0 else i) < current:
            cache.warned_grown = True
            warnings.warn(
                f"{self._source_name()} grew from {cache.n} to {current} samples after its "
                f"cache was made: samples {cache.n} and on are read uncached, each time. "
                "Make the cached dataset again once the dataset is complete to cache them.",
                CacheWarning,
                stacklevel=user_stacklevel(),
            )

    def cache_stats(self) -> dict[str, int]:
        """``samples`` (the dataset's length), and the counts and bytes of the samples
        cached per tier: ``in_memory``, ``on_disk``, ``memory_bytes``, ``disk_bytes`` (all 0
        after :meth:`close_cache`, which deletes them)."""
        self._ready_cache()
        return self._scramjet_cache.stats()

    def close_cache(self) -> None:
        """Stop background decoding and (in the creating process) delete the cache files.

        The dataset stays usable: from then on every read decodes from the dataset, uncached.
        """
        self._ready_cache()
        self._scramjet_cache.close()


class CachedDataset(Dataset[Any], _CachingMixin):
    """Wrap a map-style dataset with a cache shared by all DataLoader workers.

    Args:
        dataset: any map-style dataset (``__getitem__`` + ``__len__``).
        preloaded_data: background preloaders that decode samples ahead of the loop, from
            the first epoch on (0 = decode only on demand). Forked processes on Linux,
            threads elsewhere; one set per cache, at most ``max(1, usable cores - readers)``;
            they end once every sample is cached. No index is decoded twice.
        max_memory_size: bytes the in-memory tier may hold (``None`` = no limit); a whole
            float such as ``4e9`` is taken as that int; ``0`` is a cache on disk only
            (refused with ``spill=False``, which would cache nothing).
        transform: applied to every sample after the cache (random augmentations go here).
        spill: beyond ``max_memory_size``, store samples in a temporary directory on disk
            (True) or leave them uncached (False).
        cache_dir: parent directory of the in-memory tier (default ``/dev/shm``).
        probe: call ``dataset[0]`` twice at construction and warn if the results differ.

    Example:
        >>> import torch
        >>> from torch.utils.data import TensorDataset
        >>> from scramjet.accel import CachedDataset
        >>> ds = CachedDataset(TensorDataset(torch.arange(4.0)), max_memory_size=1 << 20)
        >>> ds[2]
        (tensor(2.),)
        >>> ds.cache_stats()["in_memory"]
        1
    """

    def __init__(
        self,
        dataset: Any,
        preloaded_data: int = 0,
        max_memory_size: float | None = None,
        transform: Callable[[Any], Any] | None = None,
        *,
        spill: bool = True,
        cache_dir: str | None = None,
        probe: bool = True,
    ) -> None:
        if (
            not hasattr(dataset, "__getitem__")
            or not hasattr(dataset, "__len__")
            or isinstance(dataset, IterableDataset)
        ):
            raise TypeError(
                f"CachedDataset needs a map-style dataset with __getitem__ and __len__, got "
                f"{type(dataset).__name__}"
                + (" (an IterableDataset)" if isinstance(dataset, IterableDataset) else "")
                + "; iterable datasets cannot be cached by index. Wrap the map-style dataset "
                "it reads from instead, or give it __getitem__(index) and __len__."
            )
        self.dataset = dataset
        settings = {
            "preloaded_data": preloaded_data,
            "max_memory_size": max_memory_size,
            "spill": spill,
            "cache_dir": cache_dir,
            "transform": transform,
            "probe": probe,
        }
        self._setup_cache(len(dataset), settings)

    def _raw_item(self, index: int) -> Any:
        return self.dataset[index]

    def _source_name(self) -> str:
        return type(self.dataset).__name__

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: Any) -> Any:
        return self._cached_item(index)

    _scramjet_getitem = __getitem__

    def __getitems__(self, indices: list[Any]) -> list[Any]:
        return self._cached_items(indices)


class _Chain:
    """Two transforms, one after the other (picklable, for spawned DataLoader workers)."""

    def __init__(self, first: Callable[[Any], Any], then: Callable[[Any], Any]) -> None:
        self.first, self.then = first, then

    def __call__(self, sample: Any) -> Any:
        return self.then(self.first(sample))


def _chain(
    first: Callable[[Any], Any] | None, then: Callable[[Any], Any] | None
) -> Callable[[Any], Any] | None:
    if first is None or then is None:
        return then if first is None else first
    return _Chain(first, then)


def _check_decorated_class(cls: Any) -> None:
    """``@accelerate_dataset`` takes a map-style class: ``__getitem__`` and ``__len__``."""
    if not isinstance(cls, type) or not hasattr(cls, "__getitem__"):
        raise TypeError(
            f"@accelerate_dataset decorates map-style Dataset classes, got {cls!r}; "
            "to wrap an instance use CachedDataset(dataset, ...)"
        )
    if issubclass(cls, IterableDataset) or not hasattr(cls, "__len__"):
        raise TypeError(
            f"@accelerate_dataset caches samples by index, so it needs a map-style class with "
            f"__getitem__ and __len__; {cls.__qualname__} "
            + ("is an IterableDataset" if issubclass(cls, IterableDataset) else "has no __len__")
            + (
                ": make it a map-style Dataset (__getitem__(index) and __len__), or decorate "
                "the map-style dataset it reads from."
                if issubclass(cls, IterableDataset)
                else ": define __len__, the number of samples."
            )
        )


def _decorate_dataset(cls: type[T], settings: dict[str, Any]) -> type[T]:
    _check_decorated_class(cls)
    base_init = cls.__init__
    dataset_cls: type[Any] = cls  # any class with __getitem__ (checked above)
    base_getitem = dataset_cls.__getitem__
    below: dict[str, Any] | None = getattr(dataset_cls, "_scramjet_settings", None)
    if below is not None and base_getitem is dataset_cls._scramjet_getitem:
        # Decorated again, right over a decorated class: one cache of the undecorated
        # samples; the class below's transform, then this one's, both after the cache.
        settings = dict(settings, transform=_chain(below["transform"], settings["transform"]))
        base_getitem = dataset_cls._raw_item
    made: list[type[Any]] = []  # the class built below (known once type() returns)

    @functools.wraps(base_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # Only the most derived decorated class builds a cache; a decorated class below it
        # then serves as its plain dataset.
        outer = self.__dict__.setdefault("_scramjet_class", made[0]) is made[0]
        if outer:
            # Until the cache exists, indexing (from the class's own __init__) decodes
            # directly, with the transform applied as it will be afterwards.
            self._scramjet_transform = settings.get("transform")
        base_init(self, *args, **kwargs)
        if outer and type(self) is made[0]:
            self._setup_cache(len(self), settings)
        elif outer:  # a subclass's __init__ goes on after this (its data set after super())
            self._scramjet_pending = settings  # the cache is built at the first read

    def _raw_item(self: Any, index: int) -> Any:
        return base_getitem(self, index)

    def __getitem__(self: Any, index: Any) -> Any:
        if self.__dict__.get("_scramjet_class", made[0]) is made[0]:
            return _CachingMixin._cached_item(self, index)
        # Reached through super() from a class decorated again further down, which caches
        # what this returns: decode, and apply this class's transform, uncached.
        fn = settings.get("transform")
        sample = base_getitem(self, index)
        return sample if fn is None else fn(sample)

    namespace = {
        "__init__": __init__,
        "_raw_item": _raw_item,
        "__getitem__": __getitem__,
        "_scramjet_getitem": __getitem__,
        "_scramjet_settings": settings,
        "__getitems__": _CachingMixin._cached_items,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    made.append(type(cls.__name__, (cls, _CachingMixin), namespace))
    return made[0]


def accelerate_dataset(
    preloaded_data: int = 0,
    max_memory_size: float | None = None,
    transform: Callable[[Any], Any] | None = None,
    *,
    spill: bool = True,
    cache_dir: str | None = None,
    probe: bool = True,
) -> Callable[[type[T]], type[T]]:
    """Class decorator: instances cache their samples like :class:`CachedDataset`.

    Returns a subclass with the same ``__name__``, ``__qualname__`` and ``__module__``, so
    ``isinstance`` and pickling (spawned DataLoader workers) work; the class itself is not
    modified. Arguments are those of :class:`CachedDataset`. A subclass of a decorated class
    may be decorated again: its instances have one cache, with this decorator's settings,
    and the transform of the class below runs before this one's, both after the cache.

    Example:
        >>> from torch.utils.data import Dataset, IterableDataset
        >>> from scramjet.accel import accelerate_dataset
        >>> @accelerate_dataset(max_memory_size=1 << 20)
        ... class Squares(Dataset):
        ...     def __len__(self):
        ...         return 5
        ...     def __getitem__(self, i):
        ...         return i * i
        >>> Squares()[3], Squares.__name__
        (9, 'Squares')
    """
    settings = {
        "preloaded_data": preloaded_data,
        "max_memory_size": max_memory_size,
        "spill": spill,
        "cache_dir": cache_dir,
        "transform": transform,
        "probe": probe,
    }
    _validate(preloaded_data, max_memory_size, spill)
    _check_transform(transform)
    return functools.partial(_decorate_dataset, settings=settings)
