"""pack's JPEG paths: simplejpeg (decode and encode) and the Pillow fallback agree."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from PIL import Image

from scramjet.data import PackError, pack
from scramjet.data.images import encode_image, encode_pixels, load_image, read_jpeg
from scramjet.data.writer import _encode_task

pytest.importorskip("simplejpeg")


def _photo(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (w + h)], axis=-1)
    return np.clip(base + rng.normal(0, 10, (h, w, 3)), 0, 255).astype(np.uint8)


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """JPEG (RGB, grayscale, with EXIF and a comment, large), PNG and CMYK sources."""
    rng = np.random.default_rng(7)
    root = tmp_path / "src"
    root.mkdir()
    exif = Image.Exif()
    exif[0x010F] = "scramjet-camera"
    Image.fromarray(_photo(rng, 256, 256)).save(root / "a.jpg", quality=90)
    Image.fromarray(_photo(rng, 700, 500)).save(root / "big.jpg", quality=85)
    Image.fromarray(_photo(rng, 90, 70)).save(
        root / "meta.jpg", quality=92, exif=exif.tobytes(), comment=b"a comment"
    )
    Image.fromarray(_photo(rng, 64, 64)[:, :, 0]).save(root / "gray.jpg", quality=90)
    Image.fromarray(_photo(rng, 48, 40)).save(root / "b.png")
    Image.fromarray(_photo(rng, 40, 40)).convert("CMYK").save(root / "cmyk.jpg", quality=90)
    names = ["a.jpg", "big.jpg", "meta.jpg", "gray.jpg", "b.png", "cmyk.jpg"]
    lines = ["image,label"] + [f"{n},{i}" for i, n in enumerate(names)]
    (root / "list.csv").write_text("\n".join(lines) + "\n")
    return root


def _pillow_frame(path: Path, size: tuple[int, int], channel: int, encode: str, q: int) -> bytes:
    img, exif = load_image(str(path), size[0], size[1], channel)
    out = encode_image(img, encode, q, exif)
    return out.tobytes() if isinstance(out, np.ndarray) else out


def _fast_frame(path: Path, size: tuple[int, int], channel: int, encode: str, q: int) -> bytes:
    task = (0, [str(path)], size[0], size[1], channel, encode, q, True)
    _, frames = _encode_task(task)
    assert isinstance(frames, list), frames
    return bytes(frames[0])


def _pixels(blob: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(blob))).astype(np.int16)


def _no_simplejpeg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "simplejpeg", None)  # import simplejpeg -> ImportError


NAMES = ["a.jpg", "big.jpg", "meta.jpg", "gray.jpg", "b.png", "cmyk.jpg"]
SIZES = [((224, 224), 3), ((100, 120), 3), ((40, 30), 3), ((60, 60), 1), ((256, 256), 3)]


@pytest.mark.parametrize("size,channel", SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_raw_pixels_equal_pillows(sources, name, size, channel):
    """simplejpeg decodes at Pillow's draft scale and resizes with Pillow: same pixels."""
    fast = _fast_frame(sources / name, size, channel, "raw", 90)
    assert fast == _pillow_frame(sources / name, size, channel, "raw", 90)


@pytest.mark.parametrize("size,channel", SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_jpeg_frames_within_tolerance_of_pillows(sources, name, size, channel):
    """Below quality 96 TurboJPEG's fast DCT differs from Pillow's accurate one, slightly."""
    fast = _pixels(_fast_frame(sources / name, size, channel, "jpeg", 90))
    slow = _pixels(_pillow_frame(sources / name, size, channel, "jpeg", 90))
    assert fast.shape == slow.shape
    diff = np.abs(fast - slow)
    assert diff.mean() <= 2.0 and diff.max() <= 32


@pytest.mark.parametrize("quality", [96, 100])
@pytest.mark.parametrize("name", ["a.jpg", "meta.jpg", "gray.jpg", "b.png"])
def test_jpeg_bytes_equal_pillows_at_high_quality(sources, name, quality):
    """At quality >= 96 both use the accurate DCT: same bytes, EXIF and comment included."""
    fast = _fast_frame(sources / name, (50, 40), 3, "jpeg", quality)
    assert fast == _pillow_frame(sources / name, (50, 40), 3, "jpeg", quality)


def test_the_fast_path_is_taken_for_jpeg_sources_only(sources):
    assert read_jpeg(str(sources / "a.jpg"), 224, 224, 3) is not None
    assert read_jpeg(str(sources / "gray.jpg"), 32, 32, 1) is not None
    assert read_jpeg(str(sources / "b.png"), 32, 32, 3) is None
    assert read_jpeg(str(sources / "cmyk.jpg"), 32, 32, 3) is None
    pixels, exif, comment = read_jpeg(str(sources / "meta.jpg"), 32, 32, 3) or (None, b"", b"")
    with Image.open(sources / "meta.jpg") as img:
        assert (exif, comment) == (img.info["exif"], img.info["comment"])
    assert pixels is not None and pixels.shape == (32, 32, 4)


def test_without_simplejpeg_pack_uses_pillow(sources, monkeypatch):
    """simplejpeg absent: read_jpeg declines, frames are Pillow's own bytes."""
    _no_simplejpeg(monkeypatch)
    assert read_jpeg(str(sources / "a.jpg"), 224, 224, 3) is None
    assert encode_pixels(np.zeros((8, 8, 4), np.uint8), "jpeg", 90, None) is None
    for name in NAMES:
        fast = _fast_frame(sources / name, (100, 120), 3, "jpeg", 90)
        assert fast == _pillow_frame(sources / name, (100, 120), 3, "jpeg", 90)


def test_packs_agree_with_and_without_simplejpeg(sources, tmp_path, monkeypatch):
    """Same labels and order, same shapes, pixels within the JPEG tolerance; EXIF kept."""
    opts = {"dtype": ["int64"], "height": 64, "width": 48, "shards": 2, "progress": False}
    pack(sources, sources / "list.csv", tmp_path / "fast", workers=2, **opts)
    _no_simplejpeg(monkeypatch)
    pack(sources, sources / "list.csv", tmp_path / "pil", workers=2, **opts)
    for shard in ("shard-00000.h5", "shard-00001.h5"):
        with h5py.File(tmp_path / "fast" / shard) as a, h5py.File(tmp_path / "pil" / shard) as b:
            assert a["label"][()].tolist() == b["label"][()].tolist()
            offs_a, offs_b = a["_offsets/image"][()], b["_offsets/image"][()]
            blob_a, blob_b = a["image"][()].tobytes(), b["image"][()].tobytes()
            for i in range(len(offs_a) - 1):
                fa = blob_a[offs_a[i] : offs_a[i + 1]]
                fb = blob_b[offs_b[i] : offs_b[i + 1]]
                diff = np.abs(_pixels(fa) - _pixels(fb))
                assert diff.mean() <= 2.0 and diff.max() <= 32
                make_a = Image.open(io.BytesIO(fa)).getexif().get(0x010F)
                assert make_a == Image.open(io.BytesIO(fb)).getexif().get(0x010F)


@pytest.mark.parametrize("simplejpeg", [True, False])
@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: data[:2] + b"garbage" * 40,  # JPEG magic, then garbage
    ],
)
def test_a_corrupt_jpeg_gives_the_same_error_with_or_without_simplejpeg(
    sources, tmp_path, monkeypatch, simplejpeg, damage
):
    bad = sources / "bad.jpg"
    bad.write_bytes(damage((sources / "a.jpg").read_bytes()))
    (sources / "list.csv").write_text("image,label\na.jpg,0\nbad.jpg,1\n")
    with pytest.raises(OSError) as pillow_error:  # what Pillow alone says about the file
        load_image(str(bad), 32, 32, 3)
    if not simplejpeg:
        _no_simplejpeg(monkeypatch)
    with pytest.raises(PackError) as info:
        pack(sources, sources / "list.csv", tmp_path / "p", dtype=["int64"], height=32,
             width=32, workers=2, progress=False)  # fmt: skip
    assert (
        f"cannot read image 'bad.jpg' ({type(pillow_error.value).__name__}: "
        f"{pillow_error.value}) (CSV row at line 3, file 'bad.jpg')" in str(info.value)
    )
