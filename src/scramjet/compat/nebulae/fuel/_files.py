"""Packs stored as single ``.hdf5``/``.h5``/``.npz`` files (nebulae's ``dst_path`` files).

A single-file pack is one shard of a scramjet pack (``scramjet/data/FORMAT.md``: one
dataset per column at the root, ``_offsets/<name>`` and ``_rows/<name>`` for variable
columns and sequences) with the pack's manifest stored inside it: the root attribute
``manifest`` of an HDF5 file, the ``__manifest__`` array of an npz file. There is no
second layout: :func:`scramjet.data.pack` writes the shards, this module only moves them
into files, and :class:`FilePack` reads them with :class:`scramjet.data.PackedDataset`'s
code.

``shards=k > 1`` writes ``<stem>_0<suffix>`` ... ``<stem>_<k-1><suffix>`` (nebulae's
names); each file records its index, the count and an id shared by the files of one
``generate()`` call, so a reader never mixes files of two runs.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scramjet.data.format import (
    MANIFEST_NAME,
    Manifest,
    PackFormatError,
    ShardInfo,
    fsync_dir,
)
from scramjet.data.images import jpeg_decoder
from scramjet.data.reader import PackedDataset
from scramjet.data.writer import PackReport

HDF5_SUFFIXES = (".hdf5", ".h5")
NPZ_SUFFIX = ".npz"
FILE_SUFFIXES = (*HDF5_SUFFIXES, NPZ_SUFFIX)
MANIFEST_ATTR = "manifest"  # root attribute of an HDF5 single-file pack
MANIFEST_KEY = "__manifest__"  # array of an npz single-file pack
_PART = "file_part"  # key in the manifest's ``extra``: index, count and id of the file


def is_file_target(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a single-file pack (``.hdf5``, ``.h5`` or ``.npz``)."""
    return Path(path).suffix.lower() in FILE_SUFFIXES


def part_paths(dst: Path, shards: int) -> list[Path]:
    """The files of a single-file pack of ``shards`` parts (nebulae's ``x_0.hdf5`` names)."""
    if shards == 1:
        return [dst]
    return [dst.with_name(f"{dst.stem}_{i}{dst.suffix}") for i in range(shards)]


# ----------------------------------------------------------------------------- writing
def write_file_pack(dst: Path, shards: int, run_pack: Callable[[Path], PackReport]) -> PackReport:
    """Pack with ``run_pack(directory)`` next to ``dst``, then move the shards into files.

    Every file is complete before it is moved into place (``os.replace``); a failure
    leaves the files that were at the destination before untouched.
    """
    outputs = part_paths(dst, shards)
    _check_destination(dst, outputs)
    work = dst.parent / f".{dst.name}.partial-{uuid.uuid4().hex[:12]}"
    work.mkdir(parents=True)
    try:
        report = run_pack(work / "pack")
        manifest = Manifest.load(work / "pack")
        pack_id = uuid.uuid4().hex
        ready = []
        for i, (info, out) in enumerate(zip(manifest.shards, outputs)):
            meta = _file_manifest(manifest, info, out.name, (i, len(outputs), pack_id))
            tmp = work / f"part-{i}{dst.suffix}"
            _finish_part(work / "pack" / info.file, tmp, meta, npz=dst.suffix.lower() == ".npz")
            ready.append((tmp, out))
        for tmp, out in ready:
            _replace(tmp, out)
        if shards > 1 and _is_file_pack(dst):
            dst.unlink()  # a one-file pack of an earlier run would be read instead
        _remove_stale_parts(dst, outputs)
        fsync_dir(dst.parent)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sizes = [out.stat().st_size for out in outputs]
    return PackReport(
        path=dst,
        num_samples=report.num_samples,
        shard_sizes=report.shard_sizes,
        bytes=sum(sizes),
        seconds=report.seconds,
        skipped=report.skipped,
    )


def _remove_stale_parts(dst: Path, outputs: list[Path]) -> None:
    """Remove the ``<stem>_<k>`` files that an earlier sharded generate() into ``dst`` wrote
    and this one did not (it had more shards, or this one has one): no Tank reads them.
    Only files that say they are part ``<stem>_<k>`` of a sharded pack are removed."""
    pattern = re.compile(rf"{re.escape(dst.stem)}_\d+{re.escape(dst.suffix)}")
    for path in dst.parent.glob(f"{glob.escape(dst.stem)}_*{glob.escape(dst.suffix)}"):
        if path in outputs or not pattern.fullmatch(path.name) or not path.is_file():
            continue
        try:
            part = _read_meta(path).extra[_PART]
        except (PackFormatError, OSError):
            continue  # not written by generate(): never removed
        if part.get("file") == path.name and int(part.get("count", 1)) > 1:
            path.unlink()


def _check_destination(dst: Path, outputs: list[Path]) -> None:
    for out in outputs:
        if out.is_dir() and not (out / MANIFEST_NAME).is_file():
            raise FileExistsError(
                f"{str(out)!r} is a directory that holds no scramjet pack; generate() would "
                "have to replace it with a file. Remove it or choose another dst_path."
            )
    if len(outputs) > 1 and dst.is_file() and not _is_file_pack(dst):
        raise FileExistsError(
            f"{str(dst)!r} exists and was not written by generate(); with shards="
            f"{len(outputs)} the data goes to {outputs[0].name} ... {outputs[-1].name}, and "
            f"Tank({dst.name!r}) would read {dst.name} instead. Remove it or choose another "
            "dst_path."
        )


def _file_manifest(
    manifest: Manifest, info: ShardInfo, name: str, part: tuple[int, int, str]
) -> str:
    """The manifest stored inside one file: the pack's columns and this file's samples."""
    index, count, pack_id = part
    inner = Manifest(
        columns=manifest.columns,
        shards=[],  # a file cannot hold its own size or digest; see FilePack
        created_by=manifest.created_by,
        extra={
            **manifest.extra,
            _PART: {
                "file": name,
                "index": index,
                "count": count,
                "id": pack_id,
                "samples": info.samples,
            },
        },
    )
    return inner.to_json()


def _finish_part(shard: Path, tmp: Path, meta: str, *, npz: bool) -> None:
    import h5py

    if not npz:
        with h5py.File(shard, "r+") as h5:
            h5.attrs[MANIFEST_ATTR] = meta
        with open(shard, "rb+") as shard_file:
            os.fsync(shard_file.fileno())
        os.replace(shard, tmp)
        return
    arrays: dict[str, np.ndarray] = {}
    with h5py.File(shard, "r") as h5:

        def collect(name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset):
                arrays[name] = np.asarray(obj[()])

        h5.visititems(collect)
    arrays[MANIFEST_KEY] = np.array(meta)
    savez: Callable[..., None] = np.savez  # npz members named after the HDF5 datasets
    with open(tmp, "wb") as fh:  # inside the work folder: moved into place when complete
        savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())


def _replace(tmp: Path, out: Path) -> None:
    """Move ``tmp`` to ``out``; an old pack directory there is swapped out, then removed."""
    if not out.is_dir() or out.is_symlink():
        os.replace(tmp, out)
        return
    old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
    os.rename(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


def _is_file_pack(path: Path) -> bool:
    try:
        _read_meta(path)
    except (PackFormatError, OSError):
        return False
    return True


# ----------------------------------------------------------------------------- reading
def _read_meta(path: Path) -> Manifest:
    """The manifest stored in a single-file pack."""
    if path.suffix.lower() == NPZ_SUFFIX:
        try:
            with np.load(path, allow_pickle=False) as npz:
                text = str(npz[MANIFEST_KEY][()]) if MANIFEST_KEY in npz.files else None
        except (ValueError, OSError) as exc:
            raise PackFormatError(f"{str(path)!r} is not a readable npz file ({exc})") from exc
    else:
        import h5py

        try:
            with h5py.File(path, "r") as h5:
                raw = h5.attrs.get(MANIFEST_ATTR)
        except OSError as exc:
            raise PackFormatError(f"{str(path)!r} is not a readable HDF5 file ({exc})") from exc
        text = raw.decode() if isinstance(raw, bytes) else None if raw is None else str(raw)
    if text is None:
        raise PackFormatError(
            f"{str(path)!r} holds no scramjet manifest: it was not written by "
            "FuelGenerator.generate() (files written by nebulae itself are not read). "
            "Generate it again with scramjet.compat.nebulae.FuelGenerator."
        )
    manifest = Manifest.from_json(text, where=str(path))
    if _PART not in manifest.extra:
        raise PackFormatError(f"{str(path)!r}: its manifest does not say which file it is")
    return manifest


def _part_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    first = path.with_name(f"{path.stem}_0{path.suffix}")
    if not first.is_file():
        raise FileNotFoundError(
            f"no data at {str(path)!r} (nor {first.name}, the first file of a sharded "
            "generate()); pass the dst_path given to FuelGenerator.generate()"
        )
    count = int(_read_meta(first).extra[_PART]["count"])
    return part_paths(path, count) if count > 1 else [first]


def open_file_pack(path: Path, columns: Sequence[str] | None) -> PackedDataset:
    """Open the single-file pack at ``path`` (or its ``_0``, ``_1``, ... parts)."""
    files = _part_files(path)
    metas: list[Manifest] = []
    for k, file in enumerate(files):
        if not file.is_file():
            raise FileNotFoundError(
                f"{file.name} is missing: {files[0].name} says the data is split into "
                f"{len(files)} files. Generate the data again."
            )
        meta = _read_meta(file)
        part = meta.extra[_PART]
        same_run = not metas or part["id"] == metas[0].extra[_PART]["id"]
        if len(files) > 1 and (part["index"] != k or not same_run):
            raise PackFormatError(
                f"{file.name} is not part {k} of the data in {files[0].name} (it comes from "
                "another generate() call); generate the data again"
            )
        metas.append(meta)
    copies: list[Path] = []  # temporary HDF5 copies of npz files, removed on any failure
    try:
        readable = [_readable(f, copies) for f in files]
        shards = [
            ShardInfo(f.name, int(m.extra[_PART]["samples"]), f.stat().st_size, "")
            for f, m in zip(readable, metas)
        ]
        manifest = Manifest(columns=metas[0].columns, shards=shards, created_by=metas[0].created_by)
        dataset = FilePack(readable, manifest, columns, source=path)
    except BaseException:
        for copy in copies:
            _remove_owned(str(copy), os.getpid())
        raise
    for copy in copies:
        weakref.finalize(dataset, _remove_owned, str(copy), os.getpid())
    return dataset


def _readable(file: Path, copies: list[Path]) -> Path:
    """``file``, or for an npz file a temporary HDF5 copy, recorded in ``copies``."""
    if file.suffix.lower() != NPZ_SUFFIX:
        return file
    copies.append(_readable_copy(file))
    return copies[-1]


def _readable_copy(npz_path: Path) -> Path:
    """An npz part written out as a temporary HDF5 shard, which the pack reader maps."""
    import h5py

    fd, name = tempfile.mkstemp(prefix="scramjet-npz-", suffix=".h5")
    os.close(fd)
    try:
        with np.load(npz_path, allow_pickle=False) as npz, h5py.File(name, "w") as h5:
            for key in npz.files:
                if key != MANIFEST_KEY:
                    h5.create_dataset(key, data=npz[key])
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


def _remove_owned(path: str, owner: int) -> None:
    if os.getpid() == owner:  # never from a forked DataLoader worker's copy
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class FilePack(PackedDataset):
    """:class:`~scramjet.data.PackedDataset` over single-file packs.

    It reads exactly as a pack directory is read; only the manifest comes from inside
    the files. A file cannot hold its own SHA-256, so files are not hashed: their
    sample counts and offset tables are checked when they are opened (``verify()``
    opens every file).
    """

    def __init__(
        self,
        files: list[Path],
        manifest: Manifest,
        columns: Sequence[str] | None,
        *,
        source: Path,
    ) -> None:
        # PackedDataset.__init__ reads manifest.json from a directory; set its state here.
        by_name = {c.name: c for c in manifest.columns}
        names = list(by_name) if columns is None else list(columns)
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise ValueError(f"unknown columns {unknown}; {source.name} has {list(by_name)}")
        self.path = source
        self.manifest = manifest
        self.columns = [by_name[n] for n in names]
        self.transform = None
        self.decoder, _ = jpeg_decoder("auto")
        self.epoch = 0
        self.verify_mode = False
        self._verified: set[int] = set()
        self._files = list(files)
        sizes = [s.samples for s in manifest.shards]
        self._ends = np.cumsum(sizes, dtype=np.int64)
        self._starts = self._ends - np.asarray(sizes, dtype=np.int64)
        self._shards = []
        self._pid = -1
        self._ring = None
        self._remote = None  # local files: nothing streamed, no read-ahead
        self.shuffle_window = None
        self.prefetch = 4
        self._prefetcher = None
        self._held = {}

    def verify(self) -> None:
        """Open every file, checking its sample counts and offset tables."""
        for k in range(len(self._files)):
            self._shard(k)
