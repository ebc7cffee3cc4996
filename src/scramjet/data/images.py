"""Image loading, encoding and decoding for packs.

Kept free of torch so the encoding worker processes of :func:`scramjet.data.pack` start
quickly. Pixels are always RGB (or single-channel grayscale), in HWC ``uint8`` layout.
Pillow releases the GIL while it decodes and resizes, and while it encodes into a file
that has a descriptor, so :func:`scramjet.data.pack` encodes with threads.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np
from PIL import Image

Decoder = Callable[[Any, int, "np.ndarray | None"], np.ndarray]


def load_image(
    path: str, height: int, width: int, channel: int
) -> tuple[Image.Image, bytes | None]:
    """Open an image file, convert it to RGB (or L) and resize it to ``height x width``.

    Returns:
        The converted image and the EXIF bytes of the source file (or None).

    Raises:
        OSError: when the file cannot be read or decoded.
    """
    mode = "L" if channel == 1 else "RGB"
    with Image.open(path) as src:
        # JPEG sources at least twice the target size decode at 1/2, 1/4 or 1/8 scale
        # (DCT scaling, still >= the target size): much faster for large photos.
        src.draft(mode, (width, height))
        src.load()  # decode fully now so truncated files fail here, not later
        exif = src.info.get("exif")
        img = src.convert(mode) if src.mode != mode else src.copy()
    if img.size != (width, height):
        img = img.resize((width, height), Image.Resampling.BILINEAR, reducing_gap=3.0)
    return img, exif if isinstance(exif, bytes) else None


def encode_image(
    img: Image.Image, encode: str, quality: int, exif: bytes | None
) -> bytes | np.ndarray:
    """Encode an already resized image as ``jpeg``/``png`` bytes, or return raw HWC pixels."""
    if encode == "raw":
        arr = np.asarray(img, dtype=np.uint8)
        return arr[:, :, None] if arr.ndim == 2 else arr
    kwargs: dict[str, Any] = {}
    if exif:
        kwargs["exif"] = exif
    if encode == "jpeg":
        return _save_through_fd(img, format="JPEG", quality=quality, **kwargs)
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1, **kwargs)
    return buf.getvalue()


def _save_through_fd(img: Image.Image, **params: Any) -> bytes:
    """``img.save(**params)`` into an anonymous file; returns the file's bytes.

    Pillow holds the GIL while it encodes into a ``BytesIO`` (``encoder.encode``), but
    releases it while it encodes into a file with a descriptor (``encode_to_file``), so
    encoding threads run in parallel. The bytes are the same either way. (PNG has no such
    path: Pillow wraps the file of a PNG, so PNG encoding holds the GIL.)
    """
    with _scratch_file() as fh:
        img.save(fh, **params)
        fh.seek(0)
        data: bytes = fh.read()
    return data


def _scratch_file() -> IO[bytes]:
    """An unbuffered, anonymous read-write file: in memory where the OS offers memfd."""
    if hasattr(os, "memfd_create"):
        try:
            fd = os.memfd_create("scramjet-encode", os.MFD_CLOEXEC)
        except OSError:  # a kernel without memfd: a temporary file does the same job
            pass
        else:
            return os.fdopen(fd, "w+b", buffering=0)
    return tempfile.TemporaryFile(buffering=0)


def _decode_pil(data: Any, channels: int, out: np.ndarray | None) -> np.ndarray:
    with Image.open(io.BytesIO(memoryview(data))) as img:
        arr = np.array(img.convert("L" if channels == 1 else "RGB"))
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if out is not None:
        out[...] = arr
        return out
    return arr


def _decode_simplejpeg(data: Any, channels: int, out: np.ndarray | None) -> np.ndarray:
    import simplejpeg

    arr: np.ndarray = simplejpeg.decode_jpeg(
        data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8),
        colorspace="GRAY" if channels == 1 else "RGB",
        buffer=out,
    )
    return arr if arr.ndim == 3 else arr[:, :, None]


def jpeg_decoder(name: str = "auto") -> tuple[str, Decoder]:
    """Pick the JPEG decoder.

    ``auto`` uses simplejpeg (libjpeg-turbo, decodes straight into a caller's buffer) when
    it is installed, and PIL otherwise; ``docs/bench/data.md`` has the measurements.

    Args:
        name: ``auto``, ``simplejpeg`` or ``pil``.

    Returns:
        The chosen name and a function ``decode(bytes, channels, out) -> HWC array``.
    """
    if name not in ("auto", "simplejpeg", "pil"):
        raise ValueError(f"decoder must be 'auto', 'simplejpeg' or 'pil', got {name!r}")
    if name in ("auto", "simplejpeg"):
        try:
            import simplejpeg  # noqa: F401
        except ImportError:
            if name == "simplejpeg":
                raise ImportError(
                    "decoder='simplejpeg' needs simplejpeg: pip install 'scramjet[jpeg]'"
                ) from None
        else:
            return "simplejpeg", _decode_simplejpeg
    return "pil", _decode_pil


def png_decoder() -> Decoder:
    """Decoder for PNG bytes (PIL)."""
    return _decode_pil
