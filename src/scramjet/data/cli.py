"""``scramjet pack``: pack images listed in a CSV file into a sharded HDF5 pack."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import PurePath


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the ``scramjet pack`` arguments to ``parser``."""
    parser.add_argument("file_dir", help="folder the CSV paths are relative to")
    parser.add_argument("file_list", help="CSV list: header, image path, then value columns")
    parser.add_argument("dst", help="pack directory to create")
    parser.add_argument(
        "--dtype",
        required=True,
        help="comma-separated dtypes of the value columns, e.g. 'int64,str,vfloat32'",
    )
    parser.add_argument("--height", type=int, required=True, help="output image height")
    parser.add_argument("--width", type=int, required=True, help="output image width")
    parser.add_argument("--channel", type=int, default=3, choices=(1, 3), help="3=RGB, 1=gray")
    parser.add_argument("--encode", default="jpeg", choices=("jpeg", "png", "raw"))
    parser.add_argument("--quality", type=int, default=95, help="JPEG quality (default 95)")
    parser.add_argument("--shards", type=int, default=1, help="number of shard files")
    parser.add_argument("--drop-exif", action="store_true", help="do not keep EXIF data")
    parser.add_argument(
        "--no-exif-orientation",
        action="store_true",
        help="store pixels as the file holds them (default: turned upright as the EXIF "
        "Orientation tag says, as image viewers show them)",
    )
    parser.add_argument("--seq", action="store_true", help="rows are frame sequences")
    parser.add_argument(
        "--workers", type=int, default=None, help="encoding workers (default: CPU count)"
    )
    parser.add_argument(
        "--pool",
        default="threads",
        choices=("threads", "processes"),
        help="encode on threads (default) or in worker processes (no shared GIL: many cores, "
        "PNG; isolates decoder crashes)",
    )
    parser.add_argument("--on-error", default="raise", choices=("raise", "skip"))
    parser.add_argument("--overwrite", action="store_true", help="replace an existing pack")
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="hide the progress bar (shown only when stderr is a terminal)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``scramjet pack``; returns the process exit status."""
    from scramjet.data.csvlist import dtype_list
    from scramjet.data.writer import pack
    from scramjet.runtime.files import why_not_creatable

    dtype = dtype_list(args.dtype)
    problem = None if "://" in args.dst else why_not_creatable(args.dst)
    if problem:
        print(f"scramjet pack: error: {problem}", file=sys.stderr)
        return 1
    try:
        report = pack(
            args.file_dir,
            args.file_list,
            args.dst,
            dtype=dtype,
            height=args.height,
            width=args.width,
            channel=args.channel,
            encode=args.encode,
            quality=args.quality,
            shards=args.shards,
            keep_exif=not args.drop_exif,
            exif_orientation=not args.no_exif_orientation,
            is_seq=args.seq,
            workers=args.workers,
            pool=args.pool,
            on_error=args.on_error,
            overwrite=args.overwrite,
            progress=not args.no_progress,
        )
    except KeyboardInterrupt:  # pack removed what it had written; no traceback for Ctrl-C
        print(f"scramjet pack: interrupted; nothing was written at {args.dst!r}", file=sys.stderr)
        return 130
    except FileExistsError as exc:  # said as the flag is typed here
        print(
            f"scramjet pack: error: {exc}".replace("overwrite=True", "--overwrite"), file=sys.stderr
        )
        return 1
    except (ValueError, TypeError, OSError) as exc:
        print(f"scramjet pack: error: {_message(exc, args.dst)}", file=sys.stderr)
        return 1
    for row in report.skipped:
        print(f"skipped CSV line {row.line} ({row.file}): {row.reason}", file=sys.stderr)
    print(
        f"packed {report.num_samples} samples into {len(report.shard_sizes)} shards at "
        f"{report.path} ({report.bytes / 1e6:.1f} MB, {report.seconds:.1f} s, "
        f"{len(report.skipped)} rows skipped)"
    )
    return 0


#: pack() arguments whose fixes name them as ``name=value``; here they are options.
_OPTIONS = ("quality", "workers", "shards", "height", "width", "channel", "encode", "pool")


def _as_options(message: str) -> str:
    """pack()'s advice said as the options are typed here: ``quality=95`` -> ``--quality 95``."""
    message = message.replace("on_error=", "--on-error ").replace("overwrite=True", "--overwrite")
    return re.sub(rf"\b({'|'.join(_OPTIONS)})=", r"--\1 ", message)


def _message(exc: Exception, dst: str) -> str:
    """``exc`` as one line for the user: an error about the hidden ``.<dst>.partial-<id>``
    folder the pack is written into (or a file in it) names ``dst`` itself."""
    if isinstance(exc, OSError) and exc.filename:
        partial = f".{PurePath(dst.rstrip('/')).name}.partial-"
        if any(p.startswith(partial) for p in PurePath(os.fsdecode(exc.filename)).parts):
            return f"could not write the pack {dst!r}: {exc.strerror or exc}"
    return _as_options(str(exc))
