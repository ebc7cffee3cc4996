"""The checks of :func:`scramjet.data.pack`'s options, each error saying what was received,
what is expected and how to fix it."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from scramjet.data import _pool
from scramjet.data._remote_fs import refuse_folded_url
from scramjet.data.format import ENCODINGS


def check_args(
    encode: str,
    height: int,
    width: int,
    channel: int,
    shards: int,
    on_error: str,
    pool: str,
) -> str:
    """Check the image and pool options; returns ``encode`` in lower case."""
    enc = str(encode).lower()
    if enc not in ENCODINGS:
        raise ValueError(f"encode must be one of {ENCODINGS}, got {encode!r}")
    for name, val in (("height", height), ("width", width), ("shards", shards)):
        whole = isinstance(val, int | np.integer) and not isinstance(val, bool | np.bool_)
        if not whole or val < 1:
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    if channel not in (1, 3):
        raise ValueError(f"channel must be 3 (RGB) or 1 (grayscale), got {channel!r}")
    _check_frame_size(enc, int(height), int(width), int(channel))
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if pool not in _pool.POOLS:
        raise ValueError(f"pool must be 'threads' or 'processes', got {pool!r}")
    if pool == "processes" and os.name != "posix":
        raise ValueError(
            f"pool='processes' needs a POSIX system (Linux, macOS); this is {os.name!r}. "
            "Use pool='threads' (the default)."
        )
    return enc


JPEG_MAX_SIDE = 65500  # the largest height or width a JPEG frame can have (libjpeg)


def _check_frame_size(enc: str, height: int, width: int, channel: int) -> None:
    """Refuse a frame size no image of the pack could be resized to: more pixels than
    Pillow opens (its decompression-bomb limit; a typo such as 99999 x 99999 would ask for
    about 30 GB per image), or a side over JPEG's limit with ``encode="jpeg"``."""
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    if limit and height * width > limit:
        raise ValueError(
            f"height x width is {height} x {width} = {height * width:,} pixels per image, "
            f"more than Pillow opens ({limit:,}, PIL.Image.MAX_IMAGE_PIXELS); each image "
            f"is resized to that size, so every one would take "
            f"{height * width * channel / 2**30:.1f} GiB. Check height and width (the size "
            f"every image is resized to), or raise PIL.Image.MAX_IMAGE_PIXELS if you mean it."
        )
    if enc == "jpeg" and max(height, width) > JPEG_MAX_SIDE:
        raise ValueError(
            f"height x width is {height} x {width}, but a JPEG frame is at most "
            f"{JPEG_MAX_SIDE} pixels on a side; pass smaller height and width, or "
            f"encode='png' or 'raw'."
        )


def check_quality(quality: Any) -> int:
    """``quality`` as a plain int from 1 to 100 (a numpy integer is taken too)."""
    whole = isinstance(quality, int | np.integer) and not isinstance(quality, bool | np.bool_)
    if not whole or not 1 <= int(quality) <= 100:
        raise ValueError(
            f"quality must be an int from 1 to 100 (JPEG quality); received "
            f"{type(quality).__name__} {quality!r}. Pass e.g. quality=95"
        )
    return int(quality)


def check_flags(**flags: Any) -> list[bool]:
    """Yes/no options as plain bools, in the order given; a string such as ``"false"``
    (a true value in Python) or a number is refused rather than read as True."""
    out = []
    for name, value in flags.items():
        if not isinstance(value, bool | np.bool_):
            raise TypeError(
                f"{name} must be True or False; received {type(value).__name__} {value!r}. "
                f"Pass {name}=True or {name}=False"
            )
        out.append(bool(value))
    return out


def check_workers(workers: Any) -> None:
    """``workers``: None (one per CPU) or an int >= 0."""
    if workers is None:
        return
    if not isinstance(workers, int | np.integer) or isinstance(workers, bool) or workers < 0:
        raise ValueError(
            f"workers must be None (one per CPU), 0 or 1 (encode in this thread) or a number "
            f"of encoding workers > 1; received {workers!r}. Pass e.g. workers=4."
        )


def warn_local_storage_options(dst: Any, storage_options: Any) -> None:
    """Warn that ``storage_options`` given with a local ``dst`` are not used: the pack is
    written to that local path (a URL such as ``bucket/photos.pack`` without its
    ``s3://`` would otherwise end up on local disk without a word)."""
    if storage_options is None:
        return
    warnings.warn(
        f"storage_options apply to a dst URL (s3://, gs://, file://...); dst {str(dst)!r} "
        "is a local path, so the pack is written there and storage_options are ignored. "
        "Write dst as a URL (e.g. 's3://bucket/photos.pack') to upload it, or leave "
        "storage_options out.",
        UserWarning,
        stacklevel=3,
    )


def check_dst(dst: Any) -> None:
    """Refuse an empty ``dst``: it would mean the current folder (an unset variable, most
    likely), which ``overwrite=True`` would replace with the pack."""
    if isinstance(dst, str | os.PathLike) and os.fspath(dst) == "":
        raise ValueError(
            "dst is empty (''); pass the path of the pack to create, e.g. 'photos.pack' "
            "(an empty dst would mean the current folder, an unset variable most likely)"
        )
    refuse_folded_url(dst, "dst")
