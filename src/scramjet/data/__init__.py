"""Packed datasets: write image folders into sharded HDF5 packs and read them fast.

Public names:

- :func:`pack` writes a pack from a folder of images and a CSV list.
- :class:`PackedDataset` reads a pack as a map-style ``torch.utils.data.Dataset``, from
  local disk or streamed from an fsspec URL (``s3://``, ``gs://``) through a local cache.
- :class:`ThreadedLoader` is what ``PackedDataset.loader(backend="threads")`` returns:
  batches read and decoded by threads in this process.
- :mod:`scramjet.data.augment` holds seeded augmentations for images and sequences.

Names are imported lazily, so ``import scramjet.data`` does not import torch, and the
encoding worker processes of :func:`pack` stay light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scramjet.data._remote import ShardDownloadError
    from scramjet.data._threads import ThreadedLoader
    from scramjet.data.format import FORMAT_VERSION, Manifest, PackFormatError
    from scramjet.data.reader import PackedDataset
    from scramjet.data.writer import PackError, PackReport, pack

_WHERE: dict[str, str] = {
    "pack": "scramjet.data.writer",
    "PackReport": "scramjet.data.writer",
    "PackError": "scramjet.data.writer",
    "PackedDataset": "scramjet.data.reader",
    "Manifest": "scramjet.data.format",
    "PackFormatError": "scramjet.data.format",
    "FORMAT_VERSION": "scramjet.data.format",
    "ShardDownloadError": "scramjet.data._remote",
    "ThreadedLoader": "scramjet.data._threads",
}

__all__ = [
    "FORMAT_VERSION",
    "Manifest",
    "PackError",
    "PackFormatError",
    "PackReport",
    "PackedDataset",
    "ShardDownloadError",
    "ThreadedLoader",
    "pack",
]


def __getattr__(name: str) -> Any:
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module 'scramjet.data' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)
