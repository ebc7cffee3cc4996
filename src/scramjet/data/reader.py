"""``PackedDataset``: a map-style torch Dataset over every shard of a pack.

Reading is built for speed. Our writer stores every dataset contiguously and
uncompressed, so after one look at the HDF5 metadata each dataset is memory-mapped
straight from the shard file: a raw image is a slice of a memmap (no decode, no HDF5
call per sample), an encoded image is a byte slice handed to the decoder. A list of
indices (``ds[[3, 9, 4]]``, or :meth:`PackedDataset.loader`, which feeds whole batches
from a batch sampler) is served with one read per shard and per column, decoding
straight into the batch array.

File handles are opened lazily, per process: a dataset built in the main process and
sent to DataLoader workers (fork or spawn) opens its own maps in each worker.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, get_worker_info

from scramjet.data._args import (
    check_reader_options,
    check_shuffle_window,
    check_transform,
    column_selection,
    index_array,
    one_index,
    scalar_index,
)
from scramjet.data._batches import batch_buffer, batch_indices, collate_samples
from scramjet.data._cache_readers import register_reader
from scramjet.data._epoch import SharedEpoch
from scramjet.data._loaders import make_loader
from scramjet.data._local_checks import LocalPackChecks, file_id
from scramjet.data._orphans import exit_with_parent
from scramjet.data._remote import Prefetcher, ShardCache, read_manifest
from scramjet.data._remote_fs import (
    Retry,
    default_cache_dir,
    is_url,
    parse_size,
    refuse_folded_url,
    url_text,
)
from scramjet.data._ring import BatchRequest, SlotRef, SlotRing
from scramjet.data._shard import BatchPlan, Shard, copy_rows
from scramjet.data.format import (
    MANIFEST_NAME,
    ColumnSpec,
    Manifest,
    PackFormatError,
)
from scramjet.data.images import jpeg_decoder, png_decoder

if TYPE_CHECKING:
    from scramjet.data._threads import ThreadedLoader

Transform = Callable[[Any], Any] | Mapping[str, Callable[[Any], Any]]
VERIFY_MODES = ("open", True, False)


class PackedDataset(LocalPackChecks, Dataset[Any]):
    """Map-style dataset over a pack written by :func:`scramjet.data.pack`.

    A sample is a dict: image columns give ``uint8`` HWC arrays (``TxHxWxC`` for
    sequences), fixed value columns numpy scalars, variable columns 1-D arrays, ``str``
    columns Python strings. Samples and the dataset itself are picklable.

    Args:
        path: the pack directory (or its ``manifest.json``).
        columns: names of the columns to read (a list, or one name as a str; default:
            all); others are never decoded.
        transform: a callable applied to the sample dict, or a mapping ``column ->
            callable`` applied to single columns. :mod:`scramjet.data.augment` objects get
            the sample index and :attr:`epoch`, so random draws are reproducible per sample;
            seeded augmentations called inside a function of yours get them too (through
            :func:`scramjet.data.augment.sample_context`).
        verify: how shard files are checked against their SHA-256 in the manifest.
            ``"open"`` (default): each shard is hashed when this dataset first opens it
            (once per dataset object: copies sent to DataLoader workers keep what was
            verified; :meth:`loader` verifies every shard in the calling process before
            starting workers). ``True``: every shard is hashed now, in the constructor.
            ``False``: no hashing (shard sizes, sample counts and offset tables are
            still checked).
        decoder: JPEG decoder, ``"auto"`` (simplejpeg if installed), ``"simplejpeg"`` or
            ``"pil"``.
        cache_dir: for a pack at a URL (``s3://``, ``gs://``, ``file://``...), the local
            directory its shards are streamed into, shared by every process of the node
            (default ``$SCRAMJET_CACHE_DIR`` or ``~/.cache/scramjet/packs``).
        cache_limit: bytes the cache directory may hold (an int, or ``"20GB"``); least
            recently used shards not in use are evicted. None: no limit.
        cache_wait: seconds a download waits for room in a full cache (every shard in use
            by readers) before it fails (default 120); see ``docs/streaming.md``.
        storage_options: fsspec options for the URL (credentials, endpoint...).
        prefetch: shards downloaded ahead of the reader, per process, in the order the
            epoch reads them (streamed packs only); default ``shuffle_window`` (the next
            window downloads while this one is read), or 4 without one.
        shuffle_window: shards shuffled together by the Trainer's sampler
            (:class:`~scramjet.trainer.data_order.EpochSampler`); default 8 for a streamed
            pack, None (one shuffle over every sample) for a local one. See
            ``docs/streaming.md`` for the trade-off.

    Example:
        >>> import numpy as np
        >>> from pathlib import Path
        >>> from PIL import Image
        >>> from scramjet.data import pack
        >>> Path("imgs").mkdir()
        >>> for i in range(6):
        ...     Image.fromarray(np.full((40, 40, 3), 40 * i, np.uint8)).save(f"imgs/{i}.png")
        >>> rows = "".join(f"{i}.png\\t{i % 3}\\n" for i in range(6))
        >>> _ = Path("imgs/list.tsv").write_text("image\\tlabel\\n" + rows)
        >>> _ = pack("imgs", "imgs/list.tsv", "imgs.pack", dtype=["int64"], height=32,
        ...          width=32, encode="raw", workers=0, progress=False)
        >>> ds = PackedDataset("imgs.pack")
        >>> sample = ds[4]
        >>> sample["image"].shape, int(sample["label"])
        ((32, 32, 3), 1)
        >>> batch = next(iter(ds.loader(batch_size=4)))
        >>> tuple(batch["image"].shape), batch["label"].tolist()
        ((4, 32, 32, 3), [0, 1, 2, 0])
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        columns: Sequence[str] | None = None,
        transform: Transform | None = None,
        verify: bool | str = "open",
        decoder: str = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int | str | None = None,
        cache_wait: float | None = None,
        storage_options: Mapping[str, Any] | None = None,
        prefetch: int | None = None,
        shuffle_window: int | None = None,
    ) -> None:
        self._remote: ShardCache | None = None
        streaming = dict(
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            storage_options=storage_options,
            cache_wait=cache_wait,
        )
        prefetch = check_reader_options(is_url(path), prefetch, streaming)
        refuse_folded_url(path, "path")
        if is_url(path):
            url = url_text(str(path)).rstrip("/")
            self.path: Path | str = url
            self.manifest = read_manifest(url, storage_options, Retry())
            self._remote = ShardCache(
                url,
                self.manifest,
                Path(cache_dir) if cache_dir is not None else default_cache_dir(),
                parse_size(cache_limit),
                storage_options,
                wait_for_room=cache_wait,
            )
            shuffle_window = 8 if shuffle_window is None else shuffle_window
        else:
            root = Path(path)
            if root.name == MANIFEST_NAME and root.is_file():
                root = root.parent
            self.path = root
            self._manifest_id = file_id(root / MANIFEST_NAME)  # before reading it
            self.manifest = Manifest.load(root)
        self.shuffle_window = check_shuffle_window(shuffle_window)
        self.prefetch = prefetch if prefetch is not None else (self.shuffle_window or 4)
        self._prefetcher: Prefetcher | None = None
        self._warned_room = False
        by_name = {c.name: c for c in self.manifest.columns}
        names = column_selection(columns, list(by_name))
        self.columns: list[ColumnSpec] = [by_name[n] for n in names]
        check_transform(transform, names)
        self.transform = transform
        self.decoder, _ = jpeg_decoder(decoder)
        self._epoch_cell = SharedEpoch()  # read by worker processes, persistent ones too
        if not any(verify is mode for mode in VERIFY_MODES) and verify != "open":
            raise ValueError(f"verify must be 'open', True or False, got {verify!r}")
        self.verify_mode: bool | str = "open" if verify == "open" else bool(verify)
        self._verified: set[int] = set()
        self._files = self._check_files() if self._remote is None else []
        if self.verify_mode is True:
            self.verify()
        sizes = [s.samples for s in self.manifest.shards]
        self._ends = np.cumsum(sizes, dtype=np.int64)
        self._starts = self._ends - np.asarray(sizes, dtype=np.int64)
        self._shards: list[Shard | None] = []
        self._held: dict[int, Any] = {}  # streamed shards open here, oldest first
        self._pins: dict[int, int] = {}  # streamed shards in use by batches being read
        self._pid = -1
        self._ring: SlotRing | None = None

    @property
    def shard_sizes(self) -> list[int]:
        """Samples per shard, in index order."""
        return [s.samples for s in self.manifest.shards]

    @property
    def streamed(self) -> bool:
        """Whether shards are streamed from a URL into the local cache."""
        return self._remote is not None

    def downloaded_bytes(self) -> int:
        """Bytes downloaded into this dataset's cache directory so far (0 for a local pack)."""
        return self._remote.downloaded_bytes() if self._remote is not None else 0

    def read_ahead(self, order: Iterable[int]) -> Iterator[int]:
        """Yield ``order`` (sample indices) while shards are downloaded ahead of it.

        Samplers call this with the epoch's order for this process: the shards are
        fetched in the order their first sample comes, ``prefetch`` at a time. When the
        iteration ends, is closed, or is dropped unfinished (a ``break`` out of the
        loader, a crash), the shards fetched ahead are let go, so they no longer take
        room in the cache. A local pack yields the order unchanged.
        """
        if self._remote is None:
            yield from order
            return
        indices = list(order)
        if not indices:
            return
        shards = self._locate(np.asarray(indices, dtype=np.int64))[0]
        first = np.unique(shards, return_index=True)[1]
        plan = [int(shards[i]) for i in np.sort(first)]
        step = {int(shards[i]): p for p, i in enumerate(np.sort(first))}
        ahead = self.read_ahead_room()
        if ahead == 0:  # no room to read ahead: each shard downloads when it is reached
            yield from indices
            return
        if self._prefetcher is None or self._pid != os.getpid() or self._prefetcher.ahead != ahead:
            if self._prefetcher is not None and self._pid == os.getpid():
                self._prefetcher.close()
            self._shard_reset()
            self._prefetcher = Prefetcher(self._remote, ahead)
        prefetcher = self._prefetcher
        generation = prefetcher.start(plan)
        try:
            for index, k in zip(indices, shards.tolist()):
                prefetcher.advance(step[k])
                yield index
        finally:  # the epoch ended, or its reading was closed or dropped (a break, a crash)
            prefetcher.stop(generation)  # its shards' room in the cache is free again

    def read_ahead_room(self, readers: int = 1) -> int:
        """The shards this process reads ahead: ``prefetch``, lowered (with a warning) to
        what ``cache_limit`` leaves once ``readers`` readers hold their shuffle window, the
        shard they leave and one download. A limit that cannot hold the windows at all is
        refused here, when the epoch starts, instead of stalling on a full cache."""
        if self._remote is None or self._remote.limit is None:
            return self.prefetch
        window = self.shuffle_window or 1
        self._check_window_room(readers)
        ahead = self.prefetch
        while ahead and not self._remote.room(readers * (window + 1) + 1 + ahead)[0]:
            ahead -= 1
        if ahead < self.prefetch and not self._warned_room:
            self._warned_room = True
            full = self._remote.room(readers * (window + 1) + 1 + self.prefetch)[1]
            warnings.warn(
                f"prefetch={self.prefetch} shards do not fit in cache_limit="
                f"{self._remote.limit} bytes next to the shuffle window of {self.path!r}: "
                f"reading {ahead} shard(s) ahead instead. Raise cache_limit to {full} bytes "
                "to read the full prefetch ahead",
                stacklevel=2,
            )
        return ahead

    # -- pickling and lazy per-process handles --------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_shards"], state["_pid"], state["_held"], state["_prefetcher"] = [], -1, {}, None
        state["_pins"] = {}
        state.pop("_held_lock", None)
        return state

    def __copy__(self) -> PackedDataset:
        """A copy with no open handles and an epoch of its own (as before, a plain int)."""
        new: PackedDataset = object.__new__(type(self))
        new.__dict__.update(self.__getstate__())
        new._epoch_cell = SharedEpoch(self.epoch)
        return new

    def _shard_reset(self) -> None:
        """Forget the handles of another process (after a fork or spawn)."""
        if self._pid != os.getpid():
            self._shards, self._pid = [None] * len(self.manifest.shards), os.getpid()
            self._held, self._prefetcher, self._pins = {}, None, {}
            self._held_lock = threading.Lock()  # reading threads share the held shards

    def _check_window_room(self, readers: int) -> None:
        """Refuse a ``cache_limit`` that cannot hold what ``readers`` readers keep in use:
        their shuffle windows and the shards they leave (reading would stall on a full
        cache, waiting for itself)."""
        assert self._remote is not None
        fits, need = self._remote.room(readers * ((self.shuffle_window or 1) + 1))
        if not fits:
            who = f"{readers} reading processes" if readers > 1 else "one reader"
            raise ValueError(
                f"cache_limit={self._remote.limit} bytes cannot hold the shards {who} of "
                f"{self.path!r} keeps in use with shuffle_window={self.shuffle_window} "
                f"(the window and the shard it leaves): at least {need} bytes are needed. "
                f"Raise cache_limit (to (shuffle_window + prefetch + 2) shards per reader "
                "for full speed) or lower shuffle_window"
            )

    def _open_streamed(self, k: int) -> str:
        """Shard ``k`` from the cache, held in use; the oldest held shards are let go."""
        assert self._remote is not None
        exit_with_parent()  # a worker waiting on a download ends if its parent is killed
        keep = max(2, (self.shuffle_window or 1) + 1)
        # Read without an epoch sampler (ds[i], a plain DataLoader), a limit below the
        # window's shards is checked by no epoch start: hold what fits, or the download
        # of shard k would wait for room this process's own idle shards take.
        while keep > 1 and not self._remote.room(keep)[0]:
            keep -= 1
        register_reader(self._remote, keep)  # refused if other processes leave no room
        with self._held_lock:  # room for shard k: its download may need an idle one's space
            self._let_go_idle(keep - 1, k)
        path, held = self._remote.open(k)
        with self._held_lock:
            self._hold(k, held)
            self._let_go_idle(keep, k)
        return str(path)

    def _hold(self, k: int, held: Any) -> None:
        if k in self._held:  # another thread opened it meanwhile: keep one hold
            held.close()
            return
        self._held[k] = held

    def _let_go_idle(self, keep: int, k: int) -> None:
        """With a ``cache_limit``, close the oldest held shards but ``k`` and pinned ones
        until at most ``keep`` are held (without a limit every map stays open)."""
        assert self._remote is not None
        if self._remote.limit is None:  # nothing is ever evicted: keep every map open
            return
        idle = [old for old in self._held if old != k and not self._pins.get(old)]
        for old in idle[: max(0, len(self._held) - keep)]:  # oldest first, never a pinned one
            self._shards[old] = None
            self._held.pop(old).close()

    def _pin(self, indices: Sequence[int]) -> list[int]:
        """Open the streamed shards that ``indices`` read, held until :meth:`_unpin`.

        For reading threads (:class:`~scramjet.data._threads.ThreadedLoader`): the thread
        that hands out batches pins each batch's shards (downloading what is missing)
        before a reading thread gets the batch, and that thread unpins them once read.
        Only the handing-out thread opens shards, and a pinned shard is never let go, so
        reading threads never open, close or wait for a shard. A local pack pins nothing.
        """
        if self._remote is None or not len(indices):
            return []
        shards: list[int] = np.unique(self._locate(np.asarray(indices, np.int64))[0]).tolist()
        need = sum(self.manifest.shards[k].bytes for k in shards)
        if self._remote.limit is not None and need > self._remote.limit:
            raise ValueError(
                f"a batch of {len(indices)} samples reads {len(shards)} shards ({need} bytes), "
                f"more than cache_limit={self._remote.limit} bytes holds: the order jumps "
                "between shards (a RandomSampler). Read in shard-window order with "
                "sampler=EpochSampler(ds) (scramjet.trainer.data_order), or raise cache_limit"
            )
        done: list[int] = []
        try:
            for k in shards:
                with self._held_lock:
                    if self._shards[k] is not None:
                        self._pins[k] = self._pins.get(k, 0) + 1
                        done.append(k)
                        continue
                self._shard(k)  # download and open it, outside the lock
                with self._held_lock:
                    self._pins[k] = self._pins.get(k, 0) + 1
                    done.append(k)
        except BaseException:
            self._unpin(done)
            raise
        return shards

    def _unpin(self, shards: Sequence[int]) -> None:
        """Release pins taken by :meth:`_pin`. With a ``cache_limit``, a shard no batch
        pins any longer is let go at once, so that its room in the cache is free for the
        next download (without a limit every shard stays open, as :meth:`_hold` does)."""
        if not shards:
            return
        assert self._remote is not None
        with self._held_lock:
            for k in shards:
                left = self._pins.get(k, 0) - 1
                if left > 0:
                    self._pins[k] = left
                    continue
                self._pins.pop(k, None)
                if self._remote.limit is not None and k in self._held:
                    self._shards[k] = None
                    self._held.pop(k).close()

    def _shard(self, k: int) -> Shard:
        self._shard_reset()  # new process (fork/spawn worker): never reuse maps
        shard = self._shards[k]
        if shard is None:
            info = self.manifest.shards[k]
            if self._remote is not None:
                file = self._open_streamed(k)
            else:
                file = str(self._files[k])
                if self.verify_mode == "open" and k not in self._verified:
                    self._verify_shard(k)  # before HDF5 parses anything of the file
                elif self._manifest_moved():
                    raise self._replaced_error(k)
            try:
                shard = Shard(file, info, self.columns)
            except (OSError, KeyError, ValueError) as exc:
                if isinstance(exc, PackFormatError):
                    raise
                raise PackFormatError(
                    f"shard {info.file} of pack {str(self.path)!r} cannot be read as a pack "
                    f"shard ({type(exc).__name__}: {exc}); the file is damaged, re-create or "
                    "re-copy the pack"
                ) from exc
            self._shards[k] = shard
        else:
            shard.check_unchanged(str(self.path))  # truncated in place: SIGBUS, not garbage
        return shard

    @property
    def epoch(self) -> int:
        """The epoch mixed into the seeds of :mod:`scramjet.data.augment` transforms."""
        return self._epoch().get()

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self._epoch().set(epoch)

    def _epoch(self) -> SharedEpoch:
        cell: SharedEpoch | None = self.__dict__.get("_epoch_cell")
        if cell is None:  # a subclass that sets its state without our __init__
            cell = self._epoch_cell = SharedEpoch()
        return cell

    #: ``set_epoch`` reaches the copies in running worker processes (shared memory): the
    #: Trainer does not warn about it with ``persistent_workers=True``.
    epoch_in_shared_memory = True

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch mixed into the seeds of :mod:`scramjet.data.augment` transforms.

        It is held in shared memory, so DataLoader worker processes, persistent ones
        included, read it too: samples read after the call draw for ``epoch``.
        """
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    def _locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(self)
        if indices.size and (indices.min() < -n or indices.max() >= n):
            bad = indices[(indices < -n) | (indices >= n)][0]
            raise IndexError(
                f"index {int(bad)} is out of range for a pack of {n} samples; valid indices "
                f"are {-n} to {n - 1} (negative ones count from the end)"
            )
        indices = np.where(indices < 0, indices + n, indices)
        shard = np.searchsorted(self._ends, indices, side="right")
        return shard, indices - self._starts[shard]

    # -- single samples -------------------------------------------------------------------
    def _decode(self, col: ColumnSpec, data: Any, out: np.ndarray | None = None) -> np.ndarray:
        if col.encoding == "jpeg":
            return jpeg_decoder(self.decoder)[1](data, col.channels or 3, out)
        return png_decoder()(data, col.channels or 3, out)

    def _damaged(self, col: ColumnSpec, shard: Shard, local: int, exc: Exception) -> Exception:
        """A frame the decoder refused, named by sample, column and shard (with
        ``verify=False`` no checksum caught the damage before)."""
        k = next(i for i, s in enumerate(self.manifest.shards) if s.file == shard.info.file)
        return PackFormatError(
            f"sample {int(self._starts[k]) + local} of {str(self.path)!r}: its {col.encoding} "
            f"frame in column {col.name!r} (shard {shard.info.file}) cannot be decoded "
            f"({type(exc).__name__}: {exc}). The shard is damaged: check it with "
            f"PackedDataset(path, verify=True) (or ds.verify()), and re-create the pack"
        )

    def _read_image(self, col: ColumnSpec, shard: Shard, local: int) -> np.ndarray:
        try:
            return self._read_frames(col, shard, local)
        except PackFormatError:
            raise
        except Exception as exc:
            raise self._damaged(col, shard, local, exc) from exc

    def _read_frames(self, col: ColumnSpec, shard: Shard, local: int) -> np.ndarray:
        data = shard.data[col.name]
        if col.sequence:
            f0, f1 = (int(v) for v in shard.rows[col.name][local : local + 2])
            if col.encoding == "raw":
                return np.array(data[f0:f1])
            shape = (f1 - f0, col.height or 0, col.width or 0, col.channels or 3)
            out = np.empty(shape, np.uint8)
            offs = shard.offsets[col.name]
            for t in range(f0, f1):
                self._decode(col, data[offs[t] : offs[t + 1]], out[t - f0])
            return out
        if col.encoding == "raw":
            return np.array(data[local])
        offs = shard.offsets[col.name]
        return self._decode(col, data[offs[local] : offs[local + 1]])

    def read_column(self, name: str, index: int) -> Any:
        """Read one column of one sample, without the transform."""
        col = next((c for c in self.columns if c.name == name), None)
        if col is None:
            raise KeyError(f"column {name!r} is not read by this dataset; has {self.column_names}")
        k, local = (int(v[0]) for v in self._locate(np.asarray([one_index(index)], np.int64)))
        return self._read_one(col, self._shard(k), local)

    def _read_one(self, col: ColumnSpec, shard: Shard, local: int) -> Any:
        if col.kind == "image":
            return self._read_image(col, shard, local)
        data = shard.data[col.name]
        if not col.variable:
            return data[local][()]
        o0, o1 = (int(v) for v in shard.offsets[col.name][local : local + 2])
        if col.dtype == "str":
            return bytes(data[o0:o1]).decode("utf-8")
        return np.array(data[o0:o1])

    @property
    def column_names(self) -> list[str]:
        """Names of the columns this dataset reads."""
        return [c.name for c in self.columns]

    def read(self, index: int) -> dict[str, Any]:
        """Read one sample as a dict, without the transform."""
        k, local = (int(v[0]) for v in self._locate(np.asarray([one_index(index)], np.int64)))
        shard = self._shard(k)
        return {c.name: self._read_one(c, shard, local) for c in self.columns}

    def _apply(self, sample: dict[str, Any], index: int) -> Any:
        from scramjet.data.augment import Augmentation, sample_context

        if self.transform is None:
            return sample
        epoch = self.epoch

        def call(fn: Callable[..., Any], x: Any) -> Any:
            if isinstance(fn, Augmentation):
                return fn(x, index=index, epoch=epoch)
            return fn(x)

        # Augmentations called inside a function of ours draw per sample too.
        with sample_context(index, epoch):
            if isinstance(self.transform, Mapping):
                for name, fn in self.transform.items():
                    sample[name] = call(fn, sample[name])
                return sample
            return call(self.transform, sample)

    def __getitem__(self, index: Any) -> Any:
        """``ds[i]`` gives one sample; ``ds[[i, j, ...]]`` a collated batch of tensors."""
        if isinstance(index, BatchRequest):
            return self._ring_batch(index)
        index = scalar_index(index)
        if isinstance(index, int):
            k, local = self._locate(np.asarray([index], dtype=np.int64))  # checks the range
            i = int(self._starts[k[0]] + local[0])  # wrapped once: ds[-1] is sample n - 1
            return self._apply(self.read(i), i)
        return self.get_batch(batch_indices(index, len(self)))

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """Samples for a list of indices (used by DataLoader), read shard by shard."""
        idx = index_array(indices)
        shards, local = self._locate(idx)
        idx = np.where(idx < 0, idx + len(self), idx)
        out: list[Any] = [None] * len(idx)
        opened: dict[int, Shard] = {}  # each shard looked up (and its size checked) once
        for pos in np.lexsort((local, shards)):  # ascending shard, then position in shard
            k = int(shards[pos])
            shard = opened.get(k)
            if shard is None:
                shard = opened[k] = self._shard(k)
            sample = {c.name: self._read_one(c, shard, int(local[pos])) for c in self.columns}
            out[pos] = self._apply(sample, int(idx[pos]))
        return out

    # -- whole batches --------------------------------------------------------------------
    def get_batch(
        self, indices: Sequence[int], image_out: np.ndarray | None = None
    ) -> dict[str, Any]:
        """A collated batch: image columns ``BxHxWxC`` uint8 tensors, values tensors.

        Variable-length and ``str`` columns (and sequences of unequal length) come back
        as lists. With a transform, samples are transformed one by one and each column is
        collated with ``default_collate``, except those, which stay lists here too.
        """
        if self.transform is not None and len(indices):  # none: the pack's columns, empty
            return collate_samples(self.__getitems__(indices), self.columns)
        idx = index_array(indices)
        plan = BatchPlan(*self._locate(idx))
        batch: dict[str, Any] = {}
        for col in self.columns:
            batch[col.name] = self._batch_column(col, plan, image_out)
        return batch

    def _ring_batch(self, request: BatchRequest) -> dict[str, Any]:
        """Worker side of :mod:`scramjet.data._ring`: fill a reusable shared slot."""
        info = get_worker_info()
        if self._ring is None or info is None:
            return self.get_batch(request.indices)
        slot, buf = self._ring.acquire(info.id, request.generation)
        n = len(request.indices)
        batch = self.get_batch(request.indices, image_out=buf[:n])
        self._ring.publish(info.id, slot, request.generation)
        image = next(c.name for c in self.columns if c.kind == "image")
        batch[image] = SlotRef(info.id, slot, n)
        return batch

    def _batch_column(self, col: ColumnSpec, plan: BatchPlan, image_out: Any = None) -> Any:
        shards, local = plan.shards, plan.local
        fixed_image = col.kind == "image" and not col.sequence
        if fixed_image or (col.kind == "value" and not col.variable):
            if fixed_image:
                shape: tuple[int, ...] = (col.height or 0, col.width or 0, col.channels or 3)
                dtype = np.dtype(np.uint8)
            else:
                shape, dtype = (), np.dtype(col.dtype)
            if fixed_image and image_out is not None:
                tensor, out = None, image_out
            else:
                tensor, out = batch_buffer((len(local), *shape), dtype, shared=fixed_image)
            if fixed_image and col.encoding not in ("jpeg", "png"):  # raw pixels
                maps = {k: self._shard(k).data[col.name] for k, _ in plan.groups}
                copy_rows(maps, plan.shard_at, plan.row_at, plan.order.tolist(), out)
                return tensor
            for k, pos in plan.groups:  # shard by shard, in file order
                shard = self._shard(k)
                if col.encoding in ("jpeg", "png"):
                    data, offs = shard.data[col.name], shard.offsets[col.name]
                    for p in pos.tolist():
                        i = plan.row_at[p]
                        try:
                            self._decode(col, data[offs[i] : offs[i + 1]], out[p])
                        except Exception as exc:
                            raise self._damaged(col, shard, int(local[p]), exc) from exc
                else:
                    out[pos] = shard.data[col.name][local[pos]]
            return tensor
        items = [self._read_one(col, self._shard(int(k)), int(i)) for k, i in zip(shards, local)]
        if col.kind == "image" and len({x.shape for x in items}) == 1:
            return torch.from_numpy(np.stack(items))
        if col.dtype == "str":
            return items
        return [torch.from_numpy(x) for x in items]

    def loader(
        self,
        batch_size: int,
        *,
        shuffle: bool = False,
        drop_last: bool = False,
        num_workers: int = 0,
        sampler: Sampler[int] | None = None,
        generator: torch.Generator | None = None,
        backend: str = "auto",
        decode_device: str | torch.device | None = None,
        **kwargs: Any,
    ) -> DataLoader[Any] | ThreadedLoader:
        """A loader that reads whole batches at once (the fast path).

        A batch sampler hands each reader a list of indices, served by :meth:`get_batch`
        with one read per shard instead of one call per sample. ``backend="threads"``
        (the default without a transform) reads and decodes in threads of this process
        into reused batch buffers (:class:`~scramjet.data._threads.ThreadedLoader`);
        ``"processes"`` uses DataLoader worker processes, for transforms that hold the
        GIL. There, with ``persistent_workers=True`` (and no transform), image batches
        travel through shared-memory slots made once (``num_workers x (prefetch_factor +
        1)`` batches) instead of a new shared segment per batch; the returned object then
        wraps the DataLoader and yields the same batches.

        Both backends give the same batches for the same sampler, and both loaders'
        ``sampler`` has ``set_epoch`` (a shuffled order that depends only on the
        generator's initial seed and the epoch) and ``set_start`` (skip the first samples
        of the next iteration), which the Trainer calls on a loader passed as
        ``train_dataset``.

        Args:
            batch_size: samples per batch (an int >= 1).
            shuffle: shuffle every epoch (not with a ``sampler``, which sets the order).
            drop_last: drop the last incomplete batch.
            num_workers: worker processes, or reading threads with ``backend="threads"``
                (there 0 means one per usable core).
            sampler: a sampler of indices, e.g. ``DistributedSampler(ds)``.
            generator: random generator for shuffling (default: one seeded from torch's
                global RNG when the loader is made).
            backend: ``"auto"`` (threads unless a transform or a process-only DataLoader
                setting is given), ``"threads"`` or ``"processes"``.
            decode_device: threads only: decode JPEG batches on this CUDA device with
                torchvision (CPU decoding, with a warning, where that is not possible).
            **kwargs: passed to ``DataLoader`` (``pin_memory``, ``persistent_workers``...);
                threads take ``pin_memory`` and ``prefetch_factor`` (an int >= 1, or None
                for 2).

        Raises:
            TypeError: ``batch_size`` or ``num_workers`` not an int, ``generator`` not a
                ``torch.Generator``.
            ValueError: ``batch_size`` or ``prefetch_factor`` below 1, ``num_workers`` below
                0, an unknown backend, ``shuffle=True`` with a ``sampler``, or a setting the
                backend does not take.
        """
        return make_loader(
            self, batch_size, shuffle=shuffle, drop_last=drop_last, num_workers=num_workers,
            sampler=sampler, generator=generator, backend=backend, decode_device=decode_device,
            kwargs=kwargs,
        )  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"PackedDataset({str(self.path)!r}, samples={len(self)}, "
            f"shards={len(self.manifest.shards)}, columns={self.column_names})"
        )
