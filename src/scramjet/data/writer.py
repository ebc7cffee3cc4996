"""``pack``: turn a folder of images and a CSV list into a sharded HDF5 pack.

How it works: rows are checked in the calling thread (paths, values), images are loaded,
resized and encoded by a pool of threads (or, with ``pool="processes"``, of processes),
and the encoded frames are appended to spool files inside a hidden temporary directory
next to ``dst``: one written in order by the calling thread (threads hand their frames
over in memory), and one per worker process, which sends back only where each frame is.
Once every row is done, the valid rows are split into exactly
``shards`` balanced shards, each written as one HDF5 file with contiguous datasets,
checksummed, and described by ``manifest.json``. Only then is the temporary directory
renamed to ``dst``: an interrupted pack leaves no directory at ``dst`` and nothing with a
manifest.

Threads are the default. Pillow and simplejpeg release the GIL while they decode, resize
and encode (see :func:`scramjet.data.images.encode_image`), so threads encode in parallel,
and a thread pool starts nothing. ``pool="processes"`` starts fresh worker interpreters
that import only scramjet's encoding code (never the caller's script): no GIL at all,
for many cores and for encoders that hold it (PNG).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scramjet.data import _pool
from scramjet.data._pack_args import (
    check_args,
    check_dst,
    check_flags,
    check_quality,
    check_workers,
    warn_local_storage_options,
)
from scramjet.data._publish import check_destination, partial_folder, publish
from scramjet.data._remote import Retry, is_url, prepare_remote_dst, upload_pack
from scramjet.data._remote_fs import url_text
from scramjet.data.csvlist import (
    Row,
    RowError,
    check_header,
    check_header_is_not_a_row,
    dtype_list,
    no_rows_message,
    parse_row,
    read_table,
)
from scramjet.data.format import (
    MANIFEST_NAME,
    OFFSETS_GROUP,
    ROWS_GROUP,
    ColumnSpec,
    Manifest,
    ShardInfo,
    file_sha256,
    fsync_dir,
    shard_name,
    write_atomic_text,
)
from scramjet.data.images import (
    encode_image,
    encode_pixels,
    load_image,
    read_jpeg,
    simplejpeg_module,
)

_COPY_BLOCK = 1 << 26  # 64 MiB per spool -> HDF5 copy


class PackError(ValueError):
    """Packing stopped on a bad row, or the arguments cannot produce a pack."""


@dataclass
class SkippedRow:
    """A row left out by ``on_error="skip"``: CSV line, file name and reason."""

    line: int
    file: str
    reason: str


@dataclass
class PackReport:
    """What :func:`pack` wrote.

    Attributes:
        path: the pack directory (its URL for a pack written to object storage).
        num_samples: samples written.
        shard_sizes: samples per shard.
        bytes: total bytes of the shard files.
        seconds: wall-clock time of the pack.
        skipped: rows left out with ``on_error="skip"``, in CSV line order.
    """

    path: Path | str
    num_samples: int
    shard_sizes: list[int]
    bytes: int
    seconds: float
    skipped: list[SkippedRow] = field(default_factory=list)


def _encode_task(task: tuple[Any, ...]) -> tuple[int, Any]:
    """Worker: load, resize and encode every frame of one row; errors come back as text.

    With simplejpeg installed, ``jpeg`` and ``raw`` frames of JPEG sources take
    :func:`~scramjet.data.images.read_jpeg` (libjpeg-turbo, GIL released) and ``jpeg``
    frames are encoded by it; everything else, and every file that path declines, is
    loaded by Pillow as before (whose errors name an unreadable file).
    """
    index, files, height, width, channel, encode, quality, keep_exif, *more = task
    upright = bool(more[0]) if more else True  # exif_orientation
    fast = encode in ("jpeg", "raw") and simplejpeg_module() is not None
    encoder = "simplejpeg" if fast else "pil"
    frames = []
    for path in files:
        step = "read"
        try:
            out = None
            got = read_jpeg(path, height, width, channel, upright) if fast else None
            if got is not None:
                pixels, exif, comment = got
                step = "encode"
                out = encode_pixels(pixels, encode, quality, exif if keep_exif else None, comment)
            if out is None:
                step = "read"
                img, exif = load_image(path, height, width, channel, upright)
                step = "encode"
                out = encode_image(img, encode, quality, exif if keep_exif else None, encoder)
        except Exception as exc:  # any failure is reported for this row, with its step
            name = os.path.basename(path)
            if step == "encode":
                return index, (
                    f"cannot encode image {name!r} as {encode} at {height} x {width} "
                    f"({type(exc).__name__}: {exc}); the file was read, check encode, "
                    f"height and width"
                )
            return index, f"cannot read image {name!r} ({type(exc).__name__}: {exc})"
        frames.append(out.tobytes() if isinstance(out, np.ndarray) else out)
    return index, frames


def _worker_died_error(rows: list[Row], exc: _pool.WorkerDied, workers: int) -> PackError:
    """The PackError for a broken encoding pool: how and on which row, what was in flight."""
    ends = [
        how
        if task is None
        else f"{how}, while it encoded CSV line {rows[task].line} {rows[task].name!r}"
        for how, task in exc.ends
    ]
    cause = "; ".join(ends) or "the pool broke, no worker exit code was available"
    shown = ", ".join(f"line {rows[i].line} {rows[i].name!r}" for i in exc.indices[:8])
    more = f" and {len(exc.indices) - 8} more" if len(exc.indices) > 8 else ""
    flight = (
        f"{len(exc.indices)} CSV rows were in flight: {shown}{more}"
        if shown
        else "no CSV row was in flight; pool='threads' needs no worker processes"
    )
    return PackError(
        f"an encoding worker process died or could not start ({cause}); "
        f"{flight}. A worker dies without "
        "a Python error when the system runs out of memory (the OOM killer) or an image "
        "decoder crashes. Pack again with fewer workers (now workers="
        f"{workers}) to use less memory, or with workers=1 to encode one row at a time in "
        "this process and find the row that crashes. Nothing was written to dst."
    )


def _task_failed_error(rows: list[Row], exc: _pool.TaskFailed, pool: str) -> PackError:
    """The PackError for an encoding task that raised: the row, and the exception."""
    row = rows[exc.index]
    return PackError(
        f"encoding the CSV row at line {row.line} (file {row.name!r}) raised {exc.detail} "
        f"in an encoding worker ({pool}). Nothing was written to dst."
    )


def _refuse_rerun() -> None:
    """Refuse a pack started while another library's worker process re-runs the script.

    Worker processes started by multiprocessing's spawn or forkserver (DataLoader workers,
    for one) first run the ``__main__`` script as ``__mp_main__``: a top-level ``pack``
    call outside ``if __name__ == "__main__":`` would pack again in every one of them.
    """
    frame = _pool.main_module_frame()
    if frame is not None and frame.f_globals.get("__name__") == "__mp_main__":
        raise PackError(
            "pack() was called while a worker process re-ran the main script "
            f"({frame.f_code.co_filename}:{frame.f_lineno}); put the call under "
            '`if __name__ == "__main__":`'
        )


def _cpu_count() -> int:
    """CPUs this process may run on (the affinity mask, where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _progress(enabled: bool, total: int) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    console = Console(stderr=True)
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        # Off a terminal (a log file, a pipe) the hidden bar left only a blank line there.
        disable=not enabled or not console.is_terminal,
        transient=True,
    )


def pack(
    file_dir: str | os.PathLike[str],
    file_list: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    dtype: Sequence[str] | str,
    height: int,
    width: int,
    channel: int = 3,
    encode: str = "jpeg",
    quality: int = 95,
    shards: int = 1,
    keep_exif: bool = True,
    exif_orientation: bool = True,
    is_seq: bool = False,
    workers: int | None = None,
    pool: str = "threads",
    on_error: str = "raise",
    overwrite: bool = False,
    progress: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> PackReport:
    """Pack the images listed in a CSV file into a sharded HDF5 pack directory.

    Args:
        file_dir: folder the CSV paths are relative to.
        file_list: CSV (tab or comma separated) with a header; first column the image path
            (for ``is_seq``, a quoted comma-joined list of frame paths), then value columns.
        dst: pack directory to create (must not exist unless ``overwrite``), or an
            fsspec URL (``s3://bucket/photos.pack``, ``gs://...``, ``file://...``): the
            pack is then written in a local temporary directory and uploaded, every shard
            first and the manifest last (readers accept it only once that exists).
        dtype: one dtype per value column: ``bool, (u)int8..64, float16/32/64, str``;
            a ``v`` prefix (``"vint64"``) makes a column variable length (lists per row).
            A list (``["int64", "str"]``) or one comma-separated string (``"int64,str"``,
            as ``scramjet pack --dtype`` takes it).
        height: output image height in pixels.
        width: output image width in pixels.
        channel: 3 for RGB, 1 for grayscale.
        encode: ``"jpeg"``, ``"png"`` (lossless) or ``"raw"`` (uint8 pixels, no decode).
        quality: JPEG quality, an int from 1 to 100.
        shards: exact number of shard files; rows are split into balanced shards.
        keep_exif: keep EXIF data in encoded images (not possible for ``raw``).
        exif_orientation: turn each image as its EXIF Orientation tag says before it is
            resized, so that it is stored upright, as image viewers show it (phone
            photos are often stored sideways with such a tag); a kept EXIF then says
            orientation 1. ``False`` stores the pixels as the file holds them.
        is_seq: rows are frame sequences.
        workers: encoding workers (default: CPU count); 0 or 1 encodes in the calling
            thread, one row at a time.
        pool: ``"threads"`` (default) or ``"processes"``. Threads start at once and
            scale while the encoders release the GIL (JPEG, raw). Processes are fresh
            interpreters that import only scramjet's encoding code, never your script
            (about 0.2 s to start): they scale past the GIL on many cores, suit encoders
            that hold it (PNG) and keep a crashing decoder from taking the program down.
            POSIX only.
        on_error: ``"raise"`` stops at the first bad row; ``"skip"`` leaves bad rows out
            and lists them in the report and the manifest.
        overwrite: replace an existing pack at ``dst`` (atomically); a folder that is not
            a pack, and a ``dst`` that is or holds ``file_dir``/``file_list``, are refused.
        progress: show a progress bar on stderr (when stderr is a terminal).
        storage_options: fsspec options for a ``dst`` URL (credentials, endpoint...).

    Returns:
        A :class:`PackReport`.

    Raises:
        PackError: a bad row (naming its CSV line and file), an impossible request, an
            encoding task that raised (naming its row and the exception), or an encoding
            worker process that died (naming the rows in flight and how it ended).

    Example:
        >>> import numpy as np
        >>> from pathlib import Path
        >>> from PIL import Image
        >>> Path("photos").mkdir()
        >>> for i in range(4):
        ...     Image.fromarray(np.full((40, 40, 3), 60 * i, np.uint8)).save(f"photos/{i}.png")
        >>> rows = "".join(f"{i}.png,{i % 2}\\n" for i in range(4))
        >>> _ = Path("photos/list.csv").write_text("image,label\\n" + rows)
        >>> report = pack("photos", "photos/list.csv", "photos.pack", dtype=["int64"],
        ...               height=32, width=32, shards=2, workers=0, progress=False)
        >>> report.num_samples, report.shard_sizes
        (4, [2, 2])
    """
    check_dst(dst)
    check_workers(workers)
    quality = check_quality(quality)
    keep_exif, exif_orientation, is_seq, overwrite, progress = check_flags(
        keep_exif=keep_exif, exif_orientation=exif_orientation, is_seq=is_seq,
        overwrite=overwrite, progress=progress,
    )  # fmt: skip
    if is_url(dst):
        return _pack_to_url(
            url_text(str(dst)), storage_options, overwrite,
            lambda local: pack(
                file_dir, file_list, local, dtype=dtype, height=height, width=width,
                channel=channel, encode=encode, quality=quality, shards=shards,
                keep_exif=keep_exif, exif_orientation=exif_orientation, is_seq=is_seq,
                workers=workers, pool=pool,
                on_error=on_error, progress=progress,
            ),
        )  # fmt: skip
    warn_local_storage_options(dst, storage_options)
    start = time.perf_counter()
    enc = check_args(encode, height, width, channel, shards, on_error, pool)
    height, width, shards = int(height), int(width), int(shards)  # NumPy ints: plain ints
    names = dtype_list(dtype)
    n_workers = _cpu_count() if workers is None else int(workers)
    _refuse_rerun()
    out = Path(dst).absolute()
    root, header, table, dtypes = _read_sources(file_dir, file_list, out, names, overwrite)
    skipped: list[SkippedRow] = []
    rows = _parse_rows(root, header, dtypes, table, is_seq, on_error, skipped)
    _check_counts(len(rows), shards, skipped)  # before encoding: too few rows is known now
    columns = _column_specs(header, dtypes, enc, quality, height, width, channel, is_seq, keep_exif)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp, held = partial_folder(out)  # held until it is published or removed
    try:
        opts = (height, width, channel, enc, quality, keep_exif, bool(exif_orientation))
        spooled = _spool_rows(rows, tmp, opts, (n_workers, pool), on_error, skipped, progress)
        skipped.sort(key=lambda row: row.line)  # found while parsing, then as workers finish
        _check_counts(len(spooled.rows), shards, skipped)
        manifest = _write_shards(tmp, spooled, columns, shards, enc, (height, width, channel))
        manifest.extra["skipped_rows"] = [vars(s) for s in skipped]
        write_atomic_text(tmp / MANIFEST_NAME, manifest.to_json())
        fsync_dir(tmp)
        publish(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(held)
    return PackReport(
        path=out,
        num_samples=manifest.num_samples,
        shard_sizes=[s.samples for s in manifest.shards],
        bytes=sum(s.bytes for s in manifest.shards),
        seconds=time.perf_counter() - start,
        skipped=skipped,
    )


def _read_sources(
    file_dir: str | os.PathLike[str],
    file_list: str | os.PathLike[str],
    out: Path,
    names: list[str],
    overwrite: bool,
) -> tuple[Path, list[str], list[tuple[int, list[str]]], list[tuple[str, bool]]]:
    """Check ``file_dir`` and the destination, and read the list: the resolved
    ``file_dir``, the header, the rows and the dtype of each value column."""
    from scramjet.runtime.files import why_not_creatable  # here: workers never import torch

    root = Path(file_dir).resolve()
    if not root.is_dir():
        raise ValueError(f"file_dir {str(file_dir)!r} is not a directory")
    check_destination(out, root, Path(file_list), overwrite)
    problem = why_not_creatable(out)
    if problem:
        raise PackError(f"{problem}; choose a dst in a folder you can write")
    header, table = read_table(file_list)
    check_header_is_not_a_row(header, root, file_list)
    if not table:
        raise PackError(no_rows_message(file_list, header))
    dtypes = check_header(header, names)
    return root, header, table, dtypes


def _check_counts(n: int, shards: int, skipped: list[SkippedRow]) -> None:
    """Refuse ``n`` valid rows that cannot make a pack of ``shards`` shards, saying which
    rows were left out as bad rows (``on_error="skip"``)."""
    if n == 0 and skipped:
        raise PackError(_all_skipped(skipped))
    if shards > n:
        first = skipped[0] if skipped else None
        why = (
            f" ({len(skipped)} bad rows were skipped, the first at CSV line {first.line}, "
            f"{first.file!r}: {first.reason})"
            if first
            else ""
        )
        raise PackError(
            f"shards={shards} but only {n} valid rows{why}; pass shards <= {n}, each shard "
            "holds at least one row"
        )


def _all_skipped(skipped: list[SkippedRow]) -> str:
    """The error for a pack whose every row was a bad row: how many, and the first reasons."""
    first = sorted(skipped, key=lambda s: s.line)[:3]
    reasons = "; ".join(f"line {s.line} ({s.file!r}): {s.reason}" for s in first)
    more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
    return (
        f"nothing to pack: all {len(skipped)} rows of the CSV list are bad rows ({reasons}"
        f"{more}); fix the list or file_dir"
    )


def _pack_to_url(
    url: str,
    options: Mapping[str, Any] | None,
    overwrite: bool,
    write_local: Callable[[Path], PackReport],
) -> PackReport:
    """Pack into a local temporary directory, then upload: shards first, manifest last."""
    start = time.perf_counter()
    prepare_remote_dst(url, options, overwrite)
    with tempfile.TemporaryDirectory(prefix="scramjet-pack-") as tmp:
        local = Path(tmp) / "pack"
        report = write_local(local)
        upload_pack(local, url, options, Retry())
    report.path, report.seconds = url.rstrip("/"), time.perf_counter() - start
    return report


def _parse_rows(
    root: Path,
    header: list[str],
    dtypes: list[tuple[str, bool]],
    table: list[tuple[int, list[str]]],
    is_seq: bool,
    on_error: str,
    skipped: list[SkippedRow],
) -> list[Row]:
    """Check every row's paths and values in the calling thread (cheap, before encoding)."""
    rows: list[Row] = []
    dirs: dict[str, str] = {}  # each folder of the list resolved once
    for line, cells in table:
        try:
            rows.append(parse_row(root, header, dtypes, line, cells, is_seq, dirs))
        except RowError as exc:
            if on_error == "raise":
                raise PackError(str(exc)) from None
            skipped.append(SkippedRow(exc.line, exc.file, exc.reason))
    return rows


@dataclass
class _Spooled:
    """Where every encoded frame is: a byte range in one of the spool files."""

    files: list[Path]  # spool files: the pack process's, then one per worker process
    rows: list[Row]  # valid rows in order
    frame_file: list[int] = field(default_factory=list)  # every frame's spool file
    frame_start: list[int] = field(default_factory=list)  # and its first byte there
    frame_sizes: list[int] = field(default_factory=list)  # byte size of every frame
    row_frames: list[int] = field(default_factory=list)  # frames per valid row


# In a worker process of pool="processes": its own spool file and where it ends.
_WORKER_SPOOL: dict[str, Any] = {}


def _encode_to_spool(
    encode: Callable[[Any], tuple[int, Any]], spool_dir: str, task: Any
) -> tuple[int, Any]:
    """Worker process: encode a row, append its frames to this process's own spool file
    and return where they are, ``(file name, start, size)`` each, instead of the bytes:
    raw frames (150 KB at 224 px) then never cross to the pack process.

    The file is written unbuffered, so every frame is in the file (the page cache) once
    its location is sent; the pack process reads them only after every row is done.
    """
    index, result = encode(task)
    if isinstance(result, str):
        return index, result
    if _WORKER_SPOOL.get("dir") != spool_dir:
        name = f"frames-{os.getpid()}.spool"
        _WORKER_SPOOL.update(dir=spool_dir, name=name, end=0)
        _WORKER_SPOOL["file"] = open(os.path.join(spool_dir, name), "xb", buffering=0)  # noqa: SIM115
    fh, name = _WORKER_SPOOL["file"], _WORKER_SPOOL["name"]
    where = []
    for frame in result:
        view = memoryview(frame)
        start = _WORKER_SPOOL["end"]
        done = 0
        while done < len(view):
            done += fh.write(view[done:])
        _WORKER_SPOOL["end"] = start + len(view)
        where.append((name, start, len(view)))
    return index, where


def _spool_rows(
    rows: list[Row],
    tmp: Path,
    opts: tuple[int, int, int, str, int, bool, bool],
    workers: tuple[int, str],
    on_error: str,
    skipped: list[SkippedRow],
    progress: bool,
) -> _Spooled:
    """Encode every row (in parallel) and record where its frames are spooled, in order.

    Threads (and ``workers<=1``) hand frames over in memory, appended here to one spool
    file; worker processes append them to spool files of their own.
    """
    tasks = [(i, row.files, *opts) for i, row in enumerate(rows)]
    n_workers, pool = workers
    spool = _Spooled([tmp / "frames.spool"], [])
    ids: dict[str, int] = {}
    # _encode_task is looked up now, so a replacement of it (in tests) reaches the workers
    fn: Callable[[Any], Any] = _encode_task
    if pool == "processes" and n_workers > 1:
        fn = functools.partial(_encode_to_spool, _encode_task, str(tmp))
    # closing(): a bad row stops the pool's workers now, not when the generator is collected
    results = _pool.results(fn, tasks, n_workers, pool)
    with open(spool.files[0], "wb") as fh, _progress(progress, len(tasks)) as bar, closing(results):
        task_id = bar.add_task("packing", total=len(tasks))
        end = 0
        try:
            for index, result in results:
                row = rows[index]
                if isinstance(result, str):
                    if on_error == "raise":
                        raise PackError(f"{result} (CSV row at line {row.line}, file {row.name!r})")
                    skipped.append(SkippedRow(row.line, row.name, result))
                    bar.advance(task_id)
                    continue
                for frame in result:
                    if isinstance(frame, tuple):  # (file, start, size) in a worker's spool
                        name, start, size = frame
                        if name not in ids:
                            ids[name] = len(spool.files)
                            spool.files.append(tmp / name)
                        spool.frame_file.append(ids[name])
                    else:
                        fh.write(frame)
                        start, size = end, len(frame)
                        end += size
                        spool.frame_file.append(0)
                    spool.frame_start.append(start)
                    spool.frame_sizes.append(size)
                spool.row_frames.append(len(result))
                spool.rows.append(row)
                bar.advance(task_id)
        except _pool.WorkerDied as exc:
            raise _worker_died_error(rows, exc, n_workers) from exc
        except _pool.TaskFailed as exc:
            raise _task_failed_error(rows, exc, pool) from exc
    return spool


def _column_specs(
    header: list[str],
    dtypes: list[tuple[str, bool]],
    enc: str,
    quality: int,
    height: int,
    width: int,
    channel: int,
    is_seq: bool,
    keep_exif: bool,
) -> list[ColumnSpec]:
    image = ColumnSpec(
        name=header[0],
        kind="image",
        dtype="uint8",
        variable=enc != "raw",
        encoding=enc,
        quality=quality if enc == "jpeg" else None,
        height=height,
        width=width,
        channels=channel,
        sequence=is_seq,
        keep_exif=keep_exif and enc != "raw",
    )
    values = [
        ColumnSpec(name=n, kind="value", dtype=b, variable=v)
        for n, (b, v) in zip(header[1:], dtypes)
    ]
    return [image, *values]


def _balanced(n: int, shards: int) -> list[tuple[int, int]]:
    base, extra = divmod(n, shards)
    bounds, start = [], 0
    for i in range(shards):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _write_shards(
    tmp: Path,
    spooled: _Spooled,
    columns: list[ColumnSpec],
    shards: int,
    enc: str,
    shape: tuple[int, int, int],
) -> Manifest:
    import scramjet

    n = len(spooled.rows)
    if n == 0:
        raise PackError("no valid rows to pack; check the CSV list and file_dir")
    frame_off = np.concatenate([[0], np.cumsum(spooled.frame_sizes, dtype=np.int64)])
    row_off = np.concatenate([[0], np.cumsum(spooled.row_frames, dtype=np.int64)])
    sealed = []
    # A shard is flushed to disk and hashed on a thread while the next one is written.
    with ExitStack() as stack:
        spools = [stack.enter_context(open(p, "rb")) for p in spooled.files]
        sealer = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="scramjet-seal"))
        for k, (a, b) in enumerate(_balanced(n, shards)):
            path = tmp / shard_name(k)
            runs = _runs(spooled, spools, int(row_off[a]), int(row_off[b]))
            _write_one(path, runs, spooled.rows[a:b], columns, frame_off, row_off, a, b, enc, shape)
            sealed.append((k, b - a, sealer.submit(_seal, path)))
        infos = [ShardInfo(shard_name(k), rows, *done.result()) for k, rows, done in sealed]
    for p in spooled.files:
        p.unlink()
    return Manifest(columns=columns, shards=infos, created_by=f"scramjet {scramjet.__version__}")


def _runs(spooled: _Spooled, spools: list[Any], f0: int, f1: int) -> list[tuple[Any, int, int]]:
    """Frames ``f0:f1`` as ``(spool file, start, length)`` runs, in order: consecutive
    frames that follow each other in the same spool file make one run."""
    runs: list[tuple[Any, int, int]] = []
    last_file, last_end = -1, -1
    for f in range(f0, f1):
        file, start, size = spooled.frame_file[f], spooled.frame_start[f], spooled.frame_sizes[f]
        if file == last_file and start == last_end:
            spool, run_start, length = runs[-1]
            runs[-1] = (spool, run_start, length + size)
        else:
            runs.append((spools[file], start, size))
        last_file, last_end = file, start + size
    return runs


def _write_one(
    path: Path,
    runs: list[tuple[Any, int, int]],
    rows: list[Row],
    columns: list[ColumnSpec],
    frame_off: np.ndarray,
    row_off: np.ndarray,
    a: int,
    b: int,
    enc: str,
    shape: tuple[int, int, int],
) -> None:
    """Write one shard: image frames copied from the spool files, then the value columns."""
    import h5py

    image = columns[0]
    f0, f1 = int(row_off[a]), int(row_off[b])  # frame range of this shard
    b0, b1 = int(frame_off[f0]), int(frame_off[f1])  # its bytes, as if in one spool
    with h5py.File(path, "w", libver="latest") as h5:
        h5.attrs["format"] = "scramjet-pack"
        h5.attrs["version"] = 1
        if enc == "raw":
            ds = h5.create_dataset(image.name, shape=(f1 - f0, *shape), dtype=np.uint8)
        else:
            ds = h5.create_dataset(image.name, shape=(b1 - b0,), dtype=np.uint8)
            h5.create_dataset(f"{OFFSETS_GROUP}/{image.name}", data=frame_off[f0 : f1 + 1] - b0)
        _copy_runs(runs, ds)
        if image.sequence:
            h5.create_dataset(f"{ROWS_GROUP}/{image.name}", data=row_off[a : b + 1] - f0)
        for j, col in enumerate(columns[1:]):
            _write_values(h5, col, [r.values[j] for r in rows])
        h5.flush()


def _seal(path: Path) -> tuple[int, str]:
    """Flush a written shard to disk; its size and SHA-256."""
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())
    return path.stat().st_size, file_sha256(path)


def _copy_runs(runs: list[tuple[Any, int, int]], ds: Any) -> None:
    """Copy the runs, in order, into ``ds`` from its start (raw: whole frames per row)."""
    row_bytes = int(np.prod(ds.shape[1:])) if ds.ndim > 1 else 1
    block = _COPY_BLOCK // row_bytes * row_bytes or row_bytes
    at = 0  # bytes of ds written so far
    for spool, start, length in runs:
        spool.seek(start)
        done = 0
        while done < length:
            take = min(block, length - done)
            buf = np.frombuffer(spool.read(take), dtype=np.uint8)
            lo, hi = (at + done) // row_bytes, (at + done + take) // row_bytes
            ds[lo:hi] = buf.reshape((hi - lo, *ds.shape[1:]))
            done += take
        at += length


def _write_values(h5: Any, col: ColumnSpec, values: list[Any]) -> None:
    """Write a value column: fixed -> one array; variable/str -> flat values + offsets."""
    if not col.variable:
        h5.create_dataset(col.name, data=np.asarray(values, dtype=np.dtype(col.dtype)))
        return
    if col.dtype == "str":
        parts = [np.frombuffer(v.encode("utf-8"), dtype=np.uint8) for v in values]
        dtype = np.dtype(np.uint8)
    else:
        dtype = np.dtype(col.dtype)
        parts = [np.asarray(v, dtype=dtype) for v in values]
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype)
    # Always a 1-D array plus offsets, even when every row has the same length.
    h5.create_dataset(col.name, data=flat.astype(dtype, copy=False), shape=(len(flat),))
    h5.create_dataset(
        f"{OFFSETS_GROUP}/{col.name}",
        data=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
    )
