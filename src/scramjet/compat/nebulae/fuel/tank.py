"""nebulae's ``Tank`` over :class:`scramjet.data.PackedDataset`.

A :class:`Tank` reads what :class:`~scramjet.compat.nebulae.fuel.generator.FuelGenerator`
wrote (a ``.hdf5``/``.h5``/``.npz`` file, or a pack directory) and serves batches through
a torch ``DataLoader`` with nebulae's ``next()``, ``MPE`` and ``len()``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from scramjet.compat.nebulae.fuel._files import is_file_target, open_file_pack
from scramjet.data._args import index_array, one_index
from scramjet.data.augment import Augmentation, sample_context
from scramjet.data.format import parse_dtype
from scramjet.data.reader import PackedDataset
from scramjet.runtime import distributed as dist
from scramjet.runtime.processes import fit_socket_tempdir
from scramjet.trainer.data_order import EpochSampler

__all__ = ["Tank"]


class _ColumnView:
    """``data['label'][idx]``: one column of the pack, indexed by sample.

    As an h5py dataset is: an integer gives one value; a slice (``data['label'][i:i + 4]``)
    or a list of integers gives the values stacked into one array (a list when their
    shapes differ: variable-length columns); ``()`` or ``...`` the whole column; a tuple
    indexes samples with its first item and each value with the rest
    (``data['image'][idx, :, :, 0]``). Anything else (a float, a mask) is refused.
    """

    def __init__(self, ds: PackedDataset, name: str) -> None:
        self._ds, self._name = ds, name

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, tuple):
            return self._axes(idx)
        if idx is Ellipsis:
            return self._many(range(len(self._ds)))
        if isinstance(idx, slice):
            return self._many(range(*idx.indices(len(self._ds))))
        if isinstance(idx, list | tuple | np.ndarray) and np.ndim(idx) == 1:
            if np.asarray(idx).dtype == np.bool_:
                raise TypeError(
                    f"data[{self._name!r}][mask]: boolean masks are not supported; received "
                    f"{len(idx)} booleans. Pass the indices instead, e.g. np.flatnonzero(mask)."
                )
            return self._many(index_array(idx).tolist())
        try:
            index = one_index(idx)
        except TypeError:
            raise TypeError(
                f"data[{self._name!r}][idx]: idx must be an integer, a slice or a list of "
                f"integers; received {type(idx).__name__} {idx!r}. Convert it first, e.g. "
                "int(i)."
            ) from None
        return self._ds.read_column(self._name, index)

    def _axes(self, idx: tuple[Any, ...]) -> Any:
        if not idx:  # h5py's ds[()]: everything
            return self[...]
        first, rest = idx[0], idx[1:]
        values = self[first]
        if not rest:
            return values
        if isinstance(values, list):
            raise TypeError(
                f"data[{self._name!r}][{idx!r}]: the values of this column differ in shape, "
                "so they cannot be indexed together; index each one, e.g. "
                f"data[{self._name!r}][i][...]."
            )
        if first is Ellipsis:
            return values[idx]
        one = not isinstance(first, slice) and np.ndim(first) == 0
        return np.asarray(values)[rest if one else (slice(None), *rest)]

    @property
    def shape(self) -> tuple[int, ...]:
        """Samples, then a value's shape (as h5py's; samples only for a ragged column)."""
        item = self._empty()
        return (len(self._ds), *(item.shape[1:] if isinstance(item, np.ndarray) else ()))

    @property
    def dtype(self) -> np.dtype[Any]:
        """The values' dtype (object for a column whose values differ in shape)."""
        item = self._empty()
        return item.dtype if isinstance(item, np.ndarray) else np.dtype(object)

    def _many(self, indices: Sequence[int]) -> Any:
        if not indices:
            return self._empty()
        values = [self._ds.read_column(self._name, i) for i in indices]
        if values and len({np.shape(v) for v in values}) > 1:
            return values  # variable-length values: one array each
        return np.array(values)

    def _empty(self) -> Any:
        """No samples, as h5py gives them: the column's dtype and item shape."""
        spec = next(c for c in self._ds.columns if c.name == self._name)
        if spec.dtype == "str":
            return np.empty((0,), np.str_)
        if spec.kind == "image" and not spec.sequence:  # decoded to one size
            shape = (0, spec.height or 0, spec.width or 0, spec.channels or 3)
            return np.empty(shape, np.uint8)
        if spec.variable or spec.sequence:
            return []  # one array per sample, of its own length: none
        return np.empty((0,), np.dtype(spec.dtype))

    def __len__(self) -> int:
        return len(self._ds)


class _Columns(Mapping[str, _ColumnView]):
    """The mapping handed to ``fetch_fn(data, idx)``: column name -> indexable column."""

    def __init__(self, ds: PackedDataset) -> None:
        self._ds = ds

    def __getitem__(self, name: str) -> _ColumnView:
        if name not in self._ds.column_names:
            raise KeyError(f"no column {name!r} in this pack; columns: {self._ds.column_names}")
        return _ColumnView(self._ds, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ds.column_names)

    def __len__(self) -> int:
        return len(self._ds.column_names)


def _parse_specf(data_specf: Mapping[str, str]) -> dict[str, tuple[str, bool]]:
    """``{column: (base dtype, variable)}``; nebulae's ``v`` prefix marks variable length."""
    if not isinstance(data_specf, Mapping):
        raise TypeError(
            f"data_specf must be a dict {{column: dtype}}, e.g. {{'image': 'uint8', "
            f"'label': 'int64'}}; received {type(data_specf).__name__}"
        )
    parsed = {}
    for name, spec in data_specf.items():
        try:
            parsed[str(name)] = parse_dtype(spec)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"data_specf[{name!r}] = {spec!r}: {exc}") from None
    return parsed


def _cast(name: str, value: Any, spec: tuple[str, bool] | None) -> Any:
    """``value`` as ``data_specf`` declares it. A cast to an integer (or bool) dtype that
    would change a value (70000 as int16, 2.7 as int64) is refused, never wrapped or
    truncated; floats are rounded to a smaller float dtype as numpy rounds them."""
    if spec is None or isinstance(value, str) or spec[0] == "str":
        return value
    stored = np.asarray(value)
    out = np.asarray(stored, spec[0])
    if out.dtype != stored.dtype and out.dtype.kind in "iub" and not np.array_equal(out, stored):
        at = int(np.flatnonzero(np.asarray(out != stored).reshape(-1))[0])
        first, read = stored.reshape(-1)[at].item(), out.reshape(-1)[at].item()
        declared = ("v" if spec[1] else "") + spec[0]
        raise ValueError(
            f"data_specf[{name!r}] = {declared!r} cannot hold the value {first!r} the pack "
            f"stores for it as {stored.dtype}: it would read as {read!r}. Declare the "
            "packed dtype, "
            f"data_specf[{name!r}] = {('v' if spec[1] else '') + stored.dtype.name!r}, and "
            "convert the values yourself (in prep_fn) if another dtype is needed."
        )
    return out


class _Collate:
    """Default batching: variable-length columns (``v`` dtypes) and arrays of unequal
    shapes become lists of tensors, everything else goes through ``default_collate``."""

    def __init__(self, ragged: Sequence[str]) -> None:
        self.ragged = frozenset(ragged)

    def __call__(self, items: list[Any]) -> Any:
        if not items or not isinstance(items[0], Mapping):
            return default_collate(items)
        out: dict[str, Any] = {}
        for key in items[0]:
            values = [item[key] for item in items]
            arrays = all(isinstance(v, np.ndarray) for v in values)
            if arrays and (key in self.ragged or len({v.shape for v in values}) > 1):
                out[key] = [torch.from_numpy(np.ascontiguousarray(v)) for v in values]
            else:
                out[key] = default_collate(values)
        return out


class _TankDataset(Dataset[Any]):
    def __init__(
        self,
        ds: PackedDataset,
        specf: Mapping[str, tuple[str, bool]],
        fetch_fn: Callable[..., Any] | None,
        prep_fn: Callable[..., Any] | None,
    ) -> None:
        self.ds, self.specf, self.fetch_fn, self.prep_fn = ds, dict(specf), fetch_fn, prep_fn
        self.epoch = 0  # set by the Tank before each epoch's workers start
        self.images = [c.name for c in ds.columns if c.kind == "image"]

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, idx: int) -> Any:
        idx = int(idx)
        if self.fetch_fn is not None:
            item = self.fetch_fn(_Columns(self.ds), idx)
        else:
            item = {k: _cast(k, v, self.specf.get(k)) for k, v in self.ds.read(idx).items()}
        if self.prep_fn is None:
            return item
        if isinstance(self.prep_fn, Augmentation):  # as PackedDataset(transform=aug)
            if isinstance(item, Mapping):
                return self._augment_image(item, self.prep_fn, idx)
            if not isinstance(item, np.ndarray | torch.Tensor):
                raise TypeError(
                    f"Tank(prep_fn={type(self.prep_fn).__name__}(...)) augments an image, or "
                    f"the image column of a dict item, but fetch_fn returned a "
                    f"{type(item).__name__}. Return a dict from fetch_fn ({{'image': "
                    "data['image'][idx], ...}), or call the Comburant inside a prep_fn on "
                    "the part to augment: def prep(item): image, label = item; return "
                    "comb(image), label."
                )
            return self.prep_fn(item, index=idx, epoch=self.epoch)
        # A seeded Comburant called inside prep_fn draws per (seed, epoch, idx), in any worker.
        with sample_context(idx, self.epoch):
            return self.prep_fn(item)

    def _augment_image(self, item: Mapping[str, Any], aug: Augmentation, idx: int) -> Any:
        """``prep_fn=Comburant(...)`` on a dict item: augment its one image column."""
        found = [k for k in item if k in self.images]
        if len(found) != 1:
            source = "fetch_fn" if self.fetch_fn is not None else "the data"
            raise TypeError(
                f"Tank(prep_fn={type(aug).__name__}(...)) augments the image column of each "
                f"item, but the items of {source} hold {sorted(map(str, item))}, with "
                f"{len(found)} image column(s) {found} (expected one). Call it inside a "
                "prep_fn on the column to augment: def prep(data): data['image'] = "
                "comb(data['image']); return data."
            )
        out = dict(item)
        out[found[0]] = aug(item[found[0]], index=idx, epoch=self.epoch)
        return out


def open_data(data_path: str | os.PathLike[str], columns: Sequence[str] | None) -> PackedDataset:
    """The data at ``data_path``: a ``.hdf5``/``.h5``/``.npz`` file, or a pack directory."""
    path = Path(data_path)
    if is_file_target(path) and not path.is_dir():
        return open_file_pack(path, columns)
    return PackedDataset(path, columns=columns)


class Tank:
    """Batches from a pack (nebulae's ``Tank``): ``next()``, ``MPE`` and ``len()``.

    Args:
        data_path: what :class:`FuelGenerator` wrote: a ``.hdf5``/``.h5``/``.npz`` file
            (or, for ``shards=k``, the same path: its ``_0`` ... ``_<k-1>`` files are read),
            or a pack directory (``FuelGenerator`` or :func:`scramjet.data.pack`).
        data_specf: ``{column: dtype}``; the columns to read and, without ``fetch_fn``,
            the dtypes they are cast to. A ``v`` prefix (``'vint64'``) marks a
            variable-length value column: each sample holds an array of its own length,
            and a batch holds a list of tensors for it. Images are decoded to the packed
            ``height x width`` whether their dtype is ``'uint8'`` or ``'vuint8'``.
        batch_size: samples per batch.
        shuffle: reshuffle every epoch.
        in_same_size: drop the last incomplete batch so all batches have the same size.
        fetch_fn: ``fetch_fn(data, idx) -> item``; ``data[column][idx]`` reads one value.
        prep_fn: ``prep_fn(item) -> item`` applied after fetching. A seeded
            :class:`Comburant` called inside it (``item["image"] = comb(item["image"])``)
            draws per sample from ``(seed, epoch, index)``, so its draws are the same with
            any ``num_workers`` and change every epoch; a :class:`Comburant` given as
            ``prep_fn`` itself gets the index and epoch directly, and augments the image
            column of dict items (the same draws as when called inside ``prep_fn``).
        collate_fn: batches items (default: torch ``default_collate``, except that
            variable-length columns and arrays of unequal shapes become lists).
        num_workers: DataLoader worker processes.
        seed: seed of the shuffling order (default: drawn from torch's RNG in a single
            process, 0 across processes, which must agree on the order).

    The order is the Trainer's :class:`~scramjet.trainer.data_order.EpochSampler`: a new
    permutation of ``(seed, epoch)`` every epoch. Across processes (a process group, or
    ``RANK`` and ``WORLD_SIZE`` set as by ``torchrun``) each process reads its own part of
    it, padded to equal lengths as ``DistributedSampler`` does.
    """

    def __init__(
        self,
        data_path: str | os.PathLike[str],
        data_specf: Mapping[str, str],
        batch_size: int,
        shuffle: bool = True,
        in_same_size: bool = True,
        fetch_fn: Callable[..., Any] | None = None,
        prep_fn: Callable[..., Any] | None = None,
        collate_fn: Callable[..., Any] | None = None,
        *,
        num_workers: int = 0,
        seed: int | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(
                f"batch_size must be a positive int, got {type(batch_size).__name__} "
                f"{batch_size!r}; pass the number of samples per batch, e.g. batch_size=32"
            )
        specf = _parse_specf(data_specf)
        packed = open_data(data_path, list(specf) or None)
        if num_workers > 0:  # check the shards once here: each epoch's workers start anew
            packed.verify()
        self.dataset = _TankDataset(packed, specf, fetch_fn, prep_fn)
        if collate_fn is None:
            # Images are decoded to one size, whatever their dtype says ('vuint8' in nebulae).
            images = {c.name for c in packed.columns if c.kind == "image"}
            collate_fn = _Collate([k for k, (_, v) in specf.items() if v and k not in images])
        self.epoch = 0
        world = dist.get_world_size()
        if seed is None:  # every process must shuffle alike; one process draws its own
            seed = 0 if world > 1 else int(torch.randint(0, 2**31 - 1, ()).item())
        self.sampler = EpochSampler(
            self.dataset,
            shuffle=shuffle,
            seed=seed,
            num_replicas=world,
            rank=dist.get_rank(),
            drop_last=in_same_size,
        )
        if num_workers > 0:
            fit_socket_tempdir()  # Python < 3.13 with a long TMPDIR: workers could not deliver
        self.loader = DataLoader(
            self.dataset,
            batch_size=batch_size,
            sampler=self.sampler,
            drop_last=in_same_size,
            collate_fn=collate_fn,
            num_workers=num_workers,
        )
        self._it: Iterator[Any] | None = None
        self._taken = 0  # batches given of the epoch under way

    def _start_epoch(self) -> None:
        self.sampler.set_epoch(self.epoch)
        self.dataset.epoch = self.epoch  # workers start below, with a copy of the dataset
        self._it = iter(self.loader)
        self._taken = 0

    def next(self) -> Any:
        """The next batch; a new, reshuffled epoch starts when one ends.

        Raises:
            ValueError: an epoch holds no batch (fewer samples than ``batch_size`` with
                ``in_same_size=True``).
        """
        if self.MPE == 0:
            share = len(self.sampler)
            where = "" if share == len(self) else f" ({share} for each of the processes)"
            raise ValueError(
                f"Tank.next(): no batch to give: {len(self)} samples{where} and "
                f"batch_size={self.loader.batch_size} with in_same_size=True, which drops "
                "the incomplete last batch, so an epoch has none. Lower batch_size, or "
                "pass in_same_size=False to get the smaller batch."
            )
        if self._it is None:
            self._start_epoch()
        elif self._taken >= self.MPE:  # the last epoch's batches are all given
            self.epoch += 1
            self._start_epoch()
        self._taken += 1
        return next(self._it)  # type: ignore[arg-type]

    def __next__(self) -> Any:
        return self.next()

    def __iter__(self) -> Iterator[Any]:
        """Yield the rest of the epoch under way: the batches :meth:`next` gives until it
        ends, after some ``next()`` calls; a whole epoch (:attr:`MPE` batches) when none is
        under way (a new Tank, or one whose epoch's last batch was given). So
        ``for epoch in range(n): for batch in tank: ...`` reads ``n`` whole epochs."""
        started = self._it is not None and self._taken < self.MPE
        for _ in range(self.MPE - self._taken if started else self.MPE):
            yield self.next()

    @property
    def MPE(self) -> int:
        """Miles (iterations) per epoch for this process."""
        return len(self.loader)

    def __len__(self) -> int:
        return len(self.dataset)
