"""Decode the JPEG images of pack batches on a CUDA device (torchvision's nvJPEG path).

``PackedDataset.loader(..., decode_device="cuda")`` reads each batch's encoded bytes in the
reading threads and decodes the whole batch on the device with
``torchvision.io.decode_jpeg(list_of_tensors, device=...)``: the host only copies
compressed bytes (about a tenth of the pixels) and the device decodes. Labels and every
other column are read on the CPU as usual, and the order is the loader's own.

Where that is not possible (no CUDA, no torchvision, a PNG or raw pack) the loader
decodes on the CPU exactly as without ``decode_device``, after one ``RuntimeWarning`` that
says why. torchvision is imported only here, lazily: its PyPI wheels are CUDA builds, so
it is never a dependency of scramjet.

Images agree with the CPU decoders up to JPEG decoder differences (IDCT and chroma
upsampling): the GPU tests allow a mean absolute difference of at most 1.5 grey levels and
a largest difference of at most 40 per batch against simplejpeg; labels and order are
identical.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from scramjet.data.format import ColumnSpec
    from scramjet.data.reader import PackedDataset

INSTALL_HINT = (
    "install a torchvision build that matches your torch and CUDA "
    "(https://pytorch.org/get-started/locally/)"
)


def decode_unavailable(device: torch.device, column: ColumnSpec | None) -> str | None:
    """Why JPEG batches cannot be decoded on ``device`` here (None: they can)."""
    if device.type != "cuda":
        return f"decode_device must be a CUDA device, got {str(device)!r}"
    if column is None or column.encoding != "jpeg":
        what = "no fixed-size image column" if column is None else f"{column.encoding} images"
        return f"the pack has {what}; only JPEG images decode on the device"
    if not torch.cuda.is_available():
        return "CUDA is not available to this torch build"
    try:
        import torchvision.io  # noqa: F401
    except ImportError as exc:
        return f"torchvision cannot be imported ({exc}); {INSTALL_HINT}"
    return None


def usable_decode_device(
    device: str | torch.device, column: ColumnSpec | None
) -> torch.device | None:
    """``device`` when JPEG batches can be decoded there; else None, after one warning."""
    try:
        target = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"decode_device must name a CUDA device such as 'cuda' or 'cuda:0', got {device!r}"
        ) from exc
    reason = decode_unavailable(target, column)
    if reason is None:
        return target
    warnings.warn(
        f"decode_device={str(target)!r}: {reason}; decoding on the CPU instead",
        RuntimeWarning,
        stacklevel=6,  # the caller of PackedDataset.loader
    )
    return None


def encoded_images(ds: PackedDataset, column: ColumnSpec, indices: list[int]) -> list[np.ndarray]:
    """The encoded bytes of ``column`` for ``indices``, in that order (copied out of the map)."""
    shards, local = ds._locate(np.asarray(indices, dtype=np.int64))
    out = []
    for k, i in zip(shards.tolist(), local.tolist()):
        shard = ds._shard(k)
        offs = shard.offsets[column.name]
        out.append(np.array(shard.data[column.name][offs[i] : offs[i + 1]]))
    return out


def decode_on_device(
    encoded: list[np.ndarray], channels: int, device: torch.device
) -> torch.Tensor:
    """Decode JPEG bytes on ``device`` into one ``B x H x W x C`` uint8 batch."""
    from torchvision.io import ImageReadMode, decode_jpeg

    mode = ImageReadMode.GRAY if channels == 1 else ImageReadMode.RGB
    data = [torch.from_numpy(b) for b in encoded]
    images: Any = decode_jpeg(data, mode=mode, device=device)
    return torch.stack(list(images)).permute(0, 2, 3, 1).contiguous()


def read_on_device(
    ds: PackedDataset,
    values: PackedDataset,
    column: ColumnSpec,
    indices: list[int],
    device: torch.device,
) -> dict[str, Any]:
    """One batch: ``column`` decoded on ``device``, the other columns read by ``values``."""
    batch = values.get_batch(indices)
    batch[column.name] = decode_on_device(
        encoded_images(ds, column, indices), column.channels or 3, device
    )
    return {c.name: batch[c.name] for c in ds.columns}
