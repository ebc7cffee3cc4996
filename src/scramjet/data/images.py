"""Image loading, encoding and decoding for packs.

Kept free of torch so the encoding worker processes of :func:`scramjet.data.pack` start
quickly. Pixels are always RGB (or single-channel grayscale), in HWC ``uint8`` layout.
Pillow releases the GIL while it decodes and resizes, and while it encodes into a file
that has a descriptor, so :func:`scramjet.data.pack` encodes with threads.

With simplejpeg installed (``scramjet[jpeg]``), packing JPEG sources into ``jpeg`` or
``raw`` frames skips Pillow's Python-level work, which holds the GIL: :func:`read_jpeg`
decodes with libjpeg-turbo (GIL released) at the scale Pillow's ``draft`` would pick,
resizes with the same Pillow call as :func:`load_image` on a zero-copy view of the
pixels, and :func:`encode_pixels` encodes with libjpeg-turbo (GIL released). Anything
that path does not read exactly as Pillow does (CMYK, 12-bit, odd markers, corrupt or
truncated data) goes through :func:`load_image` as before, with its errors.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from types import ModuleType
from typing import IO, Any, Literal

import numpy as np
from PIL import Image

Decoder = Callable[[Any, int, "np.ndarray | None"], np.ndarray]

_MAX_MARKER = 65533  # payload bytes of one JPEG marker segment (Pillow's limit too)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers


def simplejpeg_module() -> ModuleType | None:
    """The simplejpeg module, or None where it is not installed (looked up per call)."""
    try:
        import simplejpeg
    except ImportError:
        return None
    module: ModuleType = simplejpeg
    return module


def load_image(
    path: str, height: int, width: int, channel: int, upright: bool = True
) -> tuple[Image.Image, bytes | None]:
    """Open an image file, convert it to RGB (or L) and resize it to ``height x width``.

    With ``upright`` (the default), the pixels are first turned as the EXIF Orientation
    tag says (what image viewers show, Pillow's ``ImageOps.exif_transpose``), and the
    EXIF returned says orientation 1, so that nothing turns them a second time.

    Returns:
        The converted image and the EXIF bytes of the source file (or None).

    Raises:
        OSError: when the file cannot be read or decoded.
    """
    mode = "L" if channel == 1 else "RGB"
    with Image.open(path) as src:
        turn = _orientation(src) if upright else 1
        # JPEG sources at least twice the target size decode at 1/2, 1/4 or 1/8 scale
        # (DCT scaling, still >= the target size): much faster for large photos. The
        # size asked for is the stored one: height and width swap for a quarter turn.
        src.draft(mode, (height, width) if turn in _QUARTER_TURNS else (width, height))
        wide = _sixteen_bits_as_i(src)  # known from the tile, which load() clears
        src.load()  # decode fully now so truncated files fail here, not later
        exif = src.info.get("exif")
        eight = _eight_bits(src, wide)
        img = eight.convert(mode) if eight.mode != mode else eight.copy()
    if turn != 1:
        img = img.transpose(_TRANSPOSE[turn])
    if img.size != (width, height):
        img = img.resize((width, height), Image.Resampling.BILINEAR, reducing_gap=3.0)
    exif = exif if isinstance(exif, bytes) else None
    return img, upright_exif(exif) if exif and turn != 1 else exif


_ORIENTATION_TAG = 0x0112
_QUARTER_TURNS = frozenset({5, 6, 7, 8})
_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


def _orientation(src: Image.Image) -> int:
    """The EXIF Orientation of an open image: 1 (as stored) to 8; 1 when it has none,
    or an unreadable or out-of-range one (as viewers do)."""
    try:
        value = src.getexif().get(_ORIENTATION_TAG, 1)
    except Exception:  # damaged EXIF: the pixels are shown as stored
        return 1
    return value if isinstance(value, int) and value in _TRANSPOSE else 1


def exif_orientation(exif: bytes | None) -> int:
    """The Orientation in EXIF bytes (``Exif\\0\\0`` + TIFF, as Pillow's ``info``), 1 to 8."""
    if not exif:
        return 1
    parsed = Image.Exif()
    try:
        parsed.load(exif)
        value = parsed.get(_ORIENTATION_TAG, 1)
    except Exception:
        return 1
    return value if isinstance(value, int) and value in _TRANSPOSE else 1


def upright_exif(exif: bytes) -> bytes:
    """``exif`` with its Orientation set to 1, every other byte unchanged (the tag's
    value is rewritten in place); re-serialised by Pillow if the bytes cannot be
    patched so."""
    start = 6 if exif.startswith(b"Exif\0\0") else 0
    order = exif[start : start + 2]
    if order in (b"II", b"MM"):
        end: Literal["little", "big"] = "little" if order == b"II" else "big"
        at = start + int.from_bytes(exif[start + 4 : start + 8], end)
        count = int.from_bytes(exif[at : at + 2], end)
        for entry in range(at + 2, at + 2 + 12 * count, 12):
            if len(exif) < entry + 12:
                break
            tag, kind = (int.from_bytes(exif[entry + k : entry + k + 2], end) for k in (0, 2))
            if tag == _ORIENTATION_TAG and kind == 3:  # SHORT, its value held in the entry
                value = (1).to_bytes(2, end)
                return exif[: entry + 8] + value + exif[entry + 10 :]
    parsed = Image.Exif()
    parsed.load(exif)
    parsed[_ORIENTATION_TAG] = 1
    return bytes(parsed.tobytes())


_SIXTEEN_BIT = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})


def _sixteen_bits_as_i(src: Image.Image) -> bool:
    """Whether an unloaded image of mode ``I`` holds 16-bit samples (0..65535).

    Pillow opens some 16-bit grayscale files as ``I`` rather than ``I;16``: every PGM with
    a maxval above 255 (scaled to 0..65535 when the maxval is lower), and 16-bit PNGs in
    Pillow before 11. Their tile's raw mode (or the PPM format) says so.
    """
    if src.mode != "I":
        return False
    if src.format == "PPM":
        return True
    for tile in getattr(src, "tile", None) or ():
        args = tile[3] if isinstance(tile, tuple) and len(tile) > 3 else None
        raw = args[0] if isinstance(args, tuple) and args else args
        if isinstance(raw, str) and raw in _SIXTEEN_BIT:  # unsigned; "I;16S" is not
            return True
    return False


def _eight_bits(img: Image.Image, sixteen: bool = False) -> Image.Image:
    """``img`` with 8-bit samples: 16-bit grayscale is scaled (its high byte), not clipped.

    Pillow's ``convert`` clips 16-bit grayscale to 255 (a white image), while it reads
    16-bit RGB files by their high byte; both keep the high byte here, also for an ``I``
    image that ``sixteen`` says holds 16-bit samples (a 16-bit PGM). Any other 32-bit
    integer (``I``) or float (``F``) image has no fixed range: values inside 0..255 are
    converted as before, others would be clipped, so they are an error.

    Raises:
        ValueError: an ``I``/``F`` image with values outside 0..255 (or not finite).
    """
    if img.mode in _SIXTEEN_BIT or (sixteen and img.mode == "I"):
        wide = np.asarray(img).astype(np.uint16, copy=False)
        return Image.fromarray((wide >> 8).astype(np.uint8))
    if img.mode in ("I", "F"):
        values = np.asarray(img)
        low, high = values.min(), values.max()
        if not (np.isfinite(low) and np.isfinite(high) and low >= 0 and high <= 255):
            raise ValueError(
                f"image mode {img.mode!r} holds values from {low} to {high}, outside the "
                "8-bit range 0..255 that packs store (they would be clipped); scale the "
                "image to 0..255 (8 bits) before packing"
            )
        if img.mode == "F":
            if high <= 1 and not np.array_equal(values, np.round(values)):
                raise ValueError(
                    f"float image (mode 'F') holds fractions from {low:g} to {high:g}: a "
                    "0..1 image, which stored as 8 bits would be black (0 or 1 of 255); "
                    "multiply it by 255 (or save it as 8-bit) before packing"
                )
            # Pillow's convert truncates (254.9 -> 254); a pack stores the nearest level
            return Image.fromarray(np.round(values).astype(np.uint8))
    return img


def encode_image(
    img: Image.Image, encode: str, quality: int, exif: bytes | None, encoder: str = "pil"
) -> bytes | np.ndarray:
    """Encode an already resized image as ``jpeg``/``png`` bytes, or return raw HWC pixels.

    ``encoder="simplejpeg"`` encodes a ``jpeg`` frame of an RGB or L image with
    :func:`encode_pixels` (see there for how its bytes compare with Pillow's); the
    default, and anything that function does not take, encodes with Pillow.
    """
    if encode == "jpeg" and encoder == "simplejpeg" and img.mode in ("RGB", "L"):
        comment = img.info.get("comment")
        pixels = _pixels_of(img, "RGBX" if img.mode == "RGB" else "L")
        out = encode_pixels(pixels, encode, quality, exif, comment)
        if out is not None:
            return out
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


def read_jpeg(
    path: str, height: int, width: int, channel: int, upright: bool = True
) -> tuple[np.ndarray, bytes | None, bytes | None] | None:
    """:func:`load_image` for a JPEG file, decoded and encoded without Pillow's Python code.

    The file is decoded by simplejpeg (libjpeg-turbo, accurate DCT and fancy upsampling,
    as Pillow decodes) at the DCT scale Pillow's ``draft`` picks (1/2, 1/4 or 1/8 where
    the source is at least that many times the target size), turned as its EXIF
    Orientation says (with ``upright``), then resized with the same Pillow call as
    :func:`load_image` (bilinear, ``reducing_gap=3.0``) on a view of the decoded pixels.
    The pixels, and the EXIF, equal :func:`load_image`'s.

    Returns:
        ``(pixels, exif, comment)``: HWC ``uint8`` pixels of ``height x width``, RGBX
        (4 channels, the last one padding) for ``channel=3`` or 1 channel for
        ``channel=1``; the EXIF bytes and the comment that Pillow would report in
        ``info`` (or None). None where this path cannot promise Pillow's result
        (simplejpeg not installed, not a baseline/progressive 8-bit YCbCr or grayscale
        JPEG, unusual markers, a decode warning or error, more than
        ``Image.MAX_IMAGE_PIXELS`` pixels): use :func:`load_image`, which also raises
        the errors for unreadable files.
    """
    sj = simplejpeg_module()
    if sj is None:
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        meta = _jpeg_metadata(data)
        if meta is None:
            return None
        h, w, colorspace, _ = sj.decode_jpeg_header(data)
        limit = Image.MAX_IMAGE_PIXELS
        if colorspace not in ("YCbCr", "Gray") or (limit is not None and h * w > limit):
            return None
        turn = exif_orientation(meta[0]) if upright else 1
        if turn in _QUARTER_TURNS:  # the stored size: height and width swap
            height, width = width, height
        ratio = min(w // width, h // height)  # Pillow's JpegImageFile.draft
        scale = next((s for s in (8, 4, 2) if ratio >= s), 1)
        dh, dw = (h + scale - 1) // scale, (w + scale - 1) // scale
        mode = "L" if channel == 1 else "RGBX"
        arr = sj.decode_jpeg(
            data,
            "GRAY" if channel == 1 else "RGBX",
            min_height=dh,
            min_width=dw,
            min_factor=scale,
        )
    except Exception:  # Pillow decides: it reads the file or raises its error
        return None
    if arr.shape[:2] != (dh, dw):
        return None
    if turn in _QUARTER_TURNS:
        height, width = width, height
    if turn != 1:
        arr = _turn(arr, turn)
        dh, dw = arr.shape[:2]
    if (dh, dw) != (height, width):
        src = Image.frombuffer(mode, (dw, dh), arr, "raw", mode, 0, 1)  # a view, no copy
        arr = _pixels_of(
            src.resize((width, height), Image.Resampling.BILINEAR, reducing_gap=3.0), mode
        )
    exif = upright_exif(meta[0]) if meta[0] and turn != 1 else meta[0]
    return arr, exif, meta[1]


def _turn(arr: np.ndarray, orientation: int) -> np.ndarray:
    """HWC pixels turned upright as EXIF ``orientation`` (2 to 8) says, as a new
    contiguous array (Pillow's transposes of :data:`_TRANSPOSE`)."""
    if orientation in (5, 6, 7, 8):
        arr = arr.transpose(1, 0, 2)  # 5; then 6, 7, 8 flip the transposed pixels
        flips = {6: (1,), 7: (0, 1), 8: (0,)}.get(orientation, ())
    else:
        flips = {2: (1,), 3: (0, 1), 4: (0,)}[orientation]
    for axis in flips:
        arr = np.flip(arr, axis)
    return np.ascontiguousarray(arr)


def _jpeg_metadata(data: bytes) -> tuple[bytes | None, bytes | None] | None:
    """EXIF and comment of a JPEG as Pillow's ``info`` has them, or None if unusual.

    Like Pillow: the EXIF is the first ``Exif`` APP1 segment followed by the bodies of
    any later ones, the comment the last COM segment. Markers are walked up to the start
    of scan; anything Pillow would treat specially (junk between markers, standalone
    markers, a frame that is not 8-bit) gives None.
    """
    if data[:3] != b"\xff\xd8\xff":
        return None
    exif: bytes | None = None
    comment: bytes | None = None
    pos, end = 2, len(data)
    while True:
        if pos + 4 > end or data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0xDA:  # start of scan
            return exif, comment
        if marker in (0x00, 0x01, 0xD8) or 0xD0 <= marker <= 0xD7:
            return None
        size = int.from_bytes(data[pos + 2 : pos + 4], "big")
        body = data[pos + 4 : pos + 2 + size]
        if size < 2 or len(body) != size - 2:
            return None
        if marker == 0xE1 and body.startswith(b"Exif\0\0"):
            exif = body if exif is None else exif + body[6:]
        elif marker == 0xFE:
            comment = body
        elif marker in _SOF and (not body or body[0] != 8):
            return None
        pos += 2 + size


def encode_pixels(
    pixels: np.ndarray,
    encode: str,
    quality: int,
    exif: bytes | None,
    comment: Any = None,
) -> bytes | np.ndarray | None:
    """Encode :func:`read_jpeg`'s pixels (RGBX or 1 channel) as ``jpeg``, or return ``raw``.

    JPEG frames are encoded by simplejpeg (libjpeg-turbo; the GIL is released while it
    encodes) with the settings Pillow uses for ``save(format="JPEG", quality=q)``: the
    same ``quality`` (IJG tables scaled by libjpeg's ``jpeg_set_quality``, so the same
    quantisation tables), 4:2:0 chroma subsampling for RGB (Pillow's default at every
    quality) or one grayscale component, baseline, standard Huffman tables, a JFIF
    header, then the EXIF (APP1) and the comment (COM) where Pillow puts them. The one
    difference: below quality 96, TurboJPEG transforms with libjpeg's fast integer DCT
    and Pillow with the accurate one, so the bytes differ and decoded pixels differ by
    about 1-1.5 levels on average (at most about 16) at quality 90-95; at quality 96 and
    above both use the accurate DCT and the bytes are identical.

    Returns:
        The frame, or None where this encoder does not reproduce Pillow's handling of
        the metadata (a comment that is not bytes, an empty or too long comment, an EXIF
        block longer than one marker) or simplejpeg is not installed: encode with
        Pillow then.
    """
    if encode == "raw":
        return pixels if pixels.shape[2] == 1 else np.ascontiguousarray(pixels[:, :, :3])
    sj = simplejpeg_module()
    if encode != "jpeg" or sj is None:
        return None
    if comment is not None and not (isinstance(comment, bytes) and len(comment) > 0):
        return None
    extra = []
    for marker, body in ((0xE1, exif), (0xFE, comment)):
        if body:
            if len(body) > _MAX_MARKER:
                return None
            extra.append(bytes((0xFF, marker)) + (len(body) + 2).to_bytes(2, "big") + body)
    gray = pixels.shape[2] == 1
    data: bytes = sj.encode_jpeg(
        pixels,
        quality=quality,
        colorspace="GRAY" if gray else "RGBX",
        colorsubsampling="Gray" if gray else "420",
        fastdct=False,
    )
    if not extra:
        return data
    # simplejpeg writes SOI and a JFIF APP0 first; Pillow's metadata follows the APP0
    if data[2:4] != b"\xff\xe0":
        return None
    at = 4 + int.from_bytes(data[4:6], "big")
    return data[:at] + b"".join(extra) + data[at:]


def _pixels_of(img: Image.Image, mode: str) -> np.ndarray:
    """The pixels of an RGB/RGBX (as RGBX) or L image as a new HWC array.

    Pillow copies them (C code, the GIL released) into a view of the array, where
    ``np.asarray(img)`` would go through ``tobytes()``'s Python loop.
    """
    w, h = img.size
    out = np.empty((h, w, 4 if mode == "RGBX" else 1), np.uint8)
    target = Image.frombuffer(mode, (w, h), out, "raw", mode, 0, 1)  # writes go to out
    target.im.paste(img.im, (0, 0, w, h))
    return out


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
