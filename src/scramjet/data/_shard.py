"""One open shard of a pack: its columns memory-mapped, its offset tables checked, and
the plan of a batch over shards (which shard and row each sample is, in file order).

The reader (:mod:`scramjet.data.reader`) opens shards through :class:`Shard` and copies
batches with :func:`copy_rows`; everything here is per shard and holds no dataset state.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import numpy as np

from scramjet.data.format import (
    OFFSETS_GROUP,
    ROWS_GROUP,
    ColumnSpec,
    PackFormatError,
    ShardInfo,
)


def map_dataset(path: str, ds: Any) -> np.ndarray:
    """Memory-map a contiguous, uncompressed HDF5 dataset; read anything else into memory."""
    offset = ds.id.get_offset()
    if offset is None or ds.chunks is not None or ds.compression is not None or ds.size == 0:
        return np.asarray(ds[()])
    # A plain ndarray view of the map (its base keeps the map open): indexing an
    # ``np.memmap`` runs Python code (``__getitem__``, ``__array_finalize__``) for every
    # row taken, all of it under the GIL that the reading threads share.
    mapped = np.memmap(path, dtype=ds.dtype, mode="r", offset=offset, shape=ds.shape)
    return mapped.view(np.ndarray)


class BatchPlan:
    """Where the samples of a batch lie and the order to read them in, worked out once for
    every column of the batch.

    ``order`` holds the batch positions in the order the files hold them (by shard, then
    by row); ``groups`` the same positions as ``(shard, positions)`` pairs, one per shard;
    ``shard_at`` and ``row_at`` the shard and row of each position, as lists.
    """

    def __init__(self, shards: np.ndarray, local: np.ndarray) -> None:
        self.shards, self.local = shards, local
        self.shard_at: list[int] = shards.tolist()
        self.row_at: list[int] = local.tolist()
        self.order = np.lexsort((local, shards))  # stable: repeated samples keep their order
        in_order = shards[self.order].tolist()
        cuts = [0] + [j for j in range(1, len(in_order)) if in_order[j] != in_order[j - 1]]
        ends = [*cuts[1:], len(in_order)]
        self.groups = [(in_order[a], self.order[a:b]) for a, b in zip(cuts, ends) if b > a]


def copy_rows(
    maps: dict[int, np.ndarray],
    shard_at: list[int],
    row_at: list[int],
    order: list[int],
    out: np.ndarray,
) -> None:
    """``out[p] = maps[shard_at[p]][row_at[p]]`` for every batch position ``p``, in ``order``.

    One copy from the page cache into the batch per row, or per run of positions whose
    rows follow each other in one shard (a batch read in order is one copy per shard).
    Each copy releases the GIL, so reading threads copy in parallel; the Python work
    between copies, which holds it, is kept to a few list look-ups.
    """
    j, n = 0, len(order)
    while j < n:
        p = order[j]
        k, r = shard_at[p], row_at[p]
        e = j + 1
        while e < n:
            q = order[e]
            if q != p + e - j or shard_at[q] != k or row_at[q] != r + e - j:
                break
            e += 1
        if e - j == 1:
            out[p] = maps[k][r]
        else:
            out[p : p + e - j] = maps[k][r : r + e - j]
        j = e


def check_offsets(table: np.ndarray, end: int, what: str, file: str) -> None:
    """Offsets must start at 0, never decrease and end at ``end``."""
    if (
        table.ndim != 1
        or not table.size
        or table[0] != 0
        or table[-1] != end
        or bool(np.any(np.diff(table) < 0))
    ):
        raise PackFormatError(
            f"shard {file}: the {what} are damaged (they must run from 0 up to {end}); "
            "re-create or re-copy the pack"
        )


class Shard:
    """The arrays of one open shard: data maps plus in-memory offset tables.

    Opening checks that every column read holds ``info.samples`` rows and that offset
    tables are consistent, so a manifest that lies about a shard, or a damaged table
    read without verification, is an error instead of missing or garbled samples.

    The file stays open (its descriptor) so that :meth:`check_unchanged` can tell, before
    every batch, whether its size changed since: a memory map of a file cut short ends
    the process with SIGBUS when read past the new end.
    """

    def __init__(self, path: str, info: ShardInfo, columns: list[ColumnSpec]) -> None:
        import h5py

        self.info = info
        self._fd = os.open(path, os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)  # closed with the shard
        self._stamp = self._current_stamp()
        self.data: dict[str, np.ndarray] = {}
        self.offsets: dict[str, np.ndarray] = {}
        self.rows: dict[str, np.ndarray] = {}
        with h5py.File(path, "r") as h5:
            for col in columns:
                self.data[col.name] = map_dataset(path, h5[col.name])
                if col.variable:
                    self.offsets[col.name] = np.asarray(h5[f"{OFFSETS_GROUP}/{col.name}"][()])
                if col.sequence:
                    self.rows[col.name] = np.asarray(h5[f"{ROWS_GROUP}/{col.name}"][()])
        for col in columns:
            self._check_column(col, info)

    def _current_stamp(self) -> tuple[int, int]:
        st = os.fstat(self._fd)
        return st.st_size, st.st_mtime_ns

    def check_unchanged(self, pack: str) -> None:
        """Refuse to read a shard whose file was cut short, grew or was written over
        since it was opened.

        Raises:
            PackFormatError: the file's size or modification time differs from when the
                shard was opened (another program truncated or rewrote it in place).
        """
        stamp = self._current_stamp()
        if stamp == self._stamp:
            return
        (was, _), (size, _) = self._stamp, stamp
        what = f"{was} bytes when opened, {size} now" if size != was else "written over"
        raise PackFormatError(
            f"shard {self.info.file} of pack {pack!r} changed on disk while it was being read "
            f"({what}): reading its memory map would "
            "crash the process or return other bytes. Do not write over a pack in use (pack "
            "to a new path, or with overwrite=True, which replaces it whole); once the pack "
            "is complete again, make a new PackedDataset and loader"
        )

    def _check_column(self, col: ColumnSpec, info: ShardInfo) -> None:
        data = self.data[col.name]
        rows = self.rows.get(col.name)
        offsets = self.offsets.get(col.name)
        if rows is not None:
            count = len(rows) - 1
            frames = len(offsets) - 1 if offsets is not None else len(data)
            check_offsets(rows, frames, f"frame offsets of column {col.name!r}", info.file)
        elif offsets is not None:
            count = len(offsets) - 1
        else:
            count = len(data)
        if count != info.samples:
            raise PackFormatError(
                f"shard {info.file}: the manifest says it holds {info.samples} samples, but "
                f"column {col.name!r} holds {count}; the manifest or the shard was modified, "
                "re-create the pack"
            )
        if offsets is not None:
            check_offsets(offsets, len(data), f"offsets of column {col.name!r}", info.file)
