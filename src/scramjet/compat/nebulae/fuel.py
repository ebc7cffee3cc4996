"""nebulae's Fuel names (FuelGenerator, Tank, Comburant) over :mod:`scramjet.data`.

- :class:`FuelGenerator` calls :func:`scramjet.data.pack`; ``dst_path`` becomes a pack
  directory (``manifest.json`` plus ``shard-*.h5``), whatever its suffix.
- :class:`Tank` is a :class:`scramjet.data.PackedDataset` behind a torch ``DataLoader``,
  with nebulae's ``next()``, ``MPE`` and ``len()``.
- :class:`Comburant` is a :class:`scramjet.data.augment.Compose`; seeded, it draws per
  sample inside a Tank's ``prep_fn`` (the same with any number of workers).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from scramjet.data.augment import (
    Augmentation,
    Blur,
    Brighten,
    Compose,
    Contrast,
    Crop,
    Flip,
    Hue,
    Noise,
    Resize,
    Rotate,
    Sample,
    Saturate,
    sample_context,
)
from scramjet.data.reader import PackedDataset
from scramjet.data.writer import PackReport, pack
from scramjet.runtime import distributed as dist
from scramjet.trainer.data_order import EpochSampler

__all__ = [
    "Blur",
    "Brighten",
    "Comburant",
    "Contrast",
    "Crop",
    "Flip",
    "FuelGenerator",
    "Hue",
    "Noise",
    "Resize",
    "Rotate",
    "Sample",
    "Saturate",
    "Tank",
]

_SOURCE_KEYS = ("file_dir", "file_list", "dtype", "is_seq")
_OUTPUT_KEYS = ("height", "width", "channel", "encode", "shards", "keep_exif")
_EXTRA_KEYS = ("quality", "workers", "on_error", "progress")


class FuelGenerator:
    """Pack raw images and labels listed in a CSV file (nebulae's ``FuelGenerator``).

    Args:
        file_dir: where the raw data is.
        file_list: CSV list (header; image path first, then value columns).
        dtype: dtypes of the value columns (``'int64'``, ``'str'``, ``'vuint8'``...).
        is_seq: rows are frame sequences.
        config: a dict with the same keys (and optionally ``height``, ``width``,
            ``channel``, ``encode``, ``shards``, ``keep_exif``); exclusive with the others.

    Example:
        >>> import numpy as np
        >>> from pathlib import Path
        >>> from PIL import Image
        >>> Path("raw").mkdir()
        >>> for i in range(4):
        ...     Image.fromarray(np.full((20, 30, 3), 50 * i, np.uint8)).save(f"raw/{i}.jpg")
        >>> rows = "".join(f"{i}.jpg\\t{i % 2}\\n" for i in range(4))
        >>> _ = Path("raw/list.csv").write_text("image\\tlabel\\n" + rows)
        >>> fg = FuelGenerator("raw", "raw/list.csv", ["int64"], False)
        >>> _ = fg.generate("train.hdf5", 16, 16, progress=False, workers=0)
        >>> tank = Tank("train.hdf5", {"image": "uint8", "label": "int64"}, batch_size=2)
        >>> len(tank), tank.MPE, tuple(tank.next()["image"].shape)
        (4, 2, (2, 16, 16, 3))
    """

    def __init__(
        self,
        file_dir: str | Mapping[str, Any] | None = None,
        file_list: str | None = None,
        dtype: list[str] | None = None,
        is_seq: bool = False,
        *,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(file_dir, Mapping):  # FuelGenerator(config) passed positionally
            config, file_dir = file_dir, None
        given = file_dir is not None or file_list is not None or dtype is not None
        if config is not None and given:
            raise ValueError("pass either config= or file_dir/file_list/dtype, not both")
        self.params: dict[str, Any] = {
            "is_seq": False,
            "channel": 3,
            "encode": "jpeg",
            "shards": 1,
            "keep_exif": True,
        }
        if config is not None:
            self.modify(config=config)
        else:
            self.modify(file_dir=file_dir, file_list=file_list, dtype=dtype, is_seq=is_seq)

    def modify(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Change properties (``fg.modify(height=200, width=200)`` or ``config={...}``)."""
        changes = {**(dict(config) if config else {}), **kwargs}
        valid = _SOURCE_KEYS + _OUTPUT_KEYS + _EXTRA_KEYS
        unknown = sorted(set(changes) - set(valid))
        if unknown:
            raise ValueError(f"unknown FuelGenerator properties {unknown}; valid: {list(valid)}")
        self.params.update(changes)

    def generate(
        self,
        dst_path: str | os.PathLike[str],
        height: int | None = None,
        width: int | None = None,
        channel: int | None = None,
        encode: str | None = None,
        shards: int | None = None,
        keep_exif: bool | None = None,
        **kwargs: Any,
    ) -> PackReport:
        """Write the pack to ``dst_path`` (a directory; replaced if it exists).

        Arguments left as None take the generator's properties. Extra keyword arguments
        (``quality``, ``workers``, ``on_error``, ``overwrite``, ``progress``) go to
        :func:`scramjet.data.pack`.
        """
        given = {
            "height": height,
            "width": width,
            "channel": channel,
            "encode": encode,
            "shards": shards,
            "keep_exif": keep_exif,
        }
        p = {**self.params, **{k: v for k, v in given.items() if v is not None}}
        missing = [
            k for k in ("file_dir", "file_list", "dtype", "height", "width") if p.get(k) is None
        ]
        if missing:
            raise ValueError(f"FuelGenerator.generate needs {missing}; set them or pass them")
        extra = {k: p[k] for k in _EXTRA_KEYS if k in p}
        extra.setdefault("overwrite", True)
        extra.update(kwargs)
        return pack(
            p["file_dir"],
            p["file_list"],
            dst_path,
            dtype=p["dtype"],
            height=int(p["height"]),
            width=int(p["width"]),
            channel=int(p["channel"]),
            encode=str(p["encode"]).lower(),
            shards=int(p["shards"]),
            keep_exif=bool(p["keep_exif"]),
            is_seq=bool(p["is_seq"]),
            **extra,
        )


class _ColumnView:
    """``data['label'][idx]``: one column of the pack, indexed by sample."""

    def __init__(self, ds: PackedDataset, name: str) -> None:
        self._ds, self._name = ds, name

    def __getitem__(self, idx: int) -> Any:
        return self._ds.read_column(self._name, int(idx))

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


class _TankDataset(Dataset[Any]):
    def __init__(
        self,
        ds: PackedDataset,
        specf: Mapping[str, str],
        fetch_fn: Callable[..., Any] | None,
        prep_fn: Callable[..., Any] | None,
    ) -> None:
        self.ds, self.specf, self.fetch_fn, self.prep_fn = ds, dict(specf), fetch_fn, prep_fn
        self.epoch = 0  # set by the Tank before each epoch's workers start

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, idx: int) -> Any:
        idx = int(idx)
        if self.fetch_fn is not None:
            item = self.fetch_fn(_Columns(self.ds), idx)
        else:
            item = {}
            for k, v in self.ds.read(idx).items():
                dtype = self.specf.get(k)
                item[k] = (
                    v if dtype in (None, "str") or isinstance(v, str) else np.asarray(v, dtype)
                )
        if self.prep_fn is None:
            return item
        if isinstance(self.prep_fn, Augmentation):  # as PackedDataset(transform=aug)
            return self.prep_fn(item, index=idx, epoch=self.epoch)
        # A seeded Comburant called inside prep_fn draws per (seed, epoch, idx), in any worker.
        with sample_context(idx, self.epoch):
            return self.prep_fn(item)


class Tank:
    """Batches from a pack (nebulae's ``Tank``): ``next()``, ``MPE`` and ``len()``.

    Args:
        data_path: the pack directory written by :class:`FuelGenerator` or ``pack``.
        data_specf: ``{column: dtype}``; the columns to read and, without ``fetch_fn``,
            the dtypes they are cast to.
        batch_size: samples per batch.
        shuffle: reshuffle every epoch.
        in_same_size: drop the last incomplete batch so all batches have the same size.
        fetch_fn: ``fetch_fn(data, idx) -> item``; ``data[column][idx]`` reads one value.
        prep_fn: ``prep_fn(item) -> item`` applied after fetching. A seeded
            :class:`Comburant` called inside it (``item["image"] = comb(item["image"])``)
            draws per sample from ``(seed, epoch, index)``, so its draws are the same with
            any ``num_workers`` and change every epoch; a :class:`Comburant` given as
            ``prep_fn`` itself gets the index and epoch directly.
        collate_fn: batches items (default: torch ``default_collate``).
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
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        packed = PackedDataset(data_path, columns=list(data_specf) or None)
        if num_workers > 0:  # check the shards once here: each epoch's workers start anew
            packed.verify()
        self.dataset = _TankDataset(packed, data_specf, fetch_fn, prep_fn)
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
        self.loader = DataLoader(
            self.dataset,
            batch_size=batch_size,
            sampler=self.sampler,
            drop_last=in_same_size,
            collate_fn=collate_fn,
            num_workers=num_workers,
        )
        self._it: Iterator[Any] | None = None

    def _start_epoch(self) -> None:
        self.sampler.set_epoch(self.epoch)
        self.dataset.epoch = self.epoch  # workers start below, with a copy of the dataset
        self._it = iter(self.loader)

    def next(self) -> Any:
        """The next batch; a new, reshuffled epoch starts when one ends."""
        if self._it is None:
            self._start_epoch()
        try:
            return next(self._it)  # type: ignore[arg-type]
        except StopIteration:
            self.epoch += 1
            self._start_epoch()
            return next(self._it)  # type: ignore[arg-type]

    def __next__(self) -> Any:
        return self.next()

    def __iter__(self) -> Iterator[Any]:
        """Yield :attr:`MPE` batches (one epoch's worth)."""
        for _ in range(self.MPE):
            yield self.next()

    @property
    def MPE(self) -> int:
        """Miles (iterations) per epoch for this process."""
        return len(self.loader)

    def __len__(self) -> int:
        return len(self.dataset)


class Comburant(Compose):
    """A container of augmentations applied in order (nebulae's ``Comburant``).

    Example:
        >>> import numpy as np
        >>> comburant = Comburant(Flip(), Brighten(0.2), seed=0)
        >>> comburant(np.zeros((8, 8, 3), np.uint8)).shape
        (8, 8, 3)
    """

    def __init__(self, *augmentations: Augmentation, seed: int | None = None) -> None:
        super().__init__(*augmentations, seed=seed)
