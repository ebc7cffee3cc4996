"""The input of an augmentation: what it accepts, and its internal float form."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Channel counts an image is taken to have (gray, gray + alpha, RGB, RGBA) when its layout
#: is read from its shape: an axis this size at the wrong end tells a swapped layout.
_FEW_CHANNELS = range(1, 5)


def _check_pixels(shape: tuple[int, ...], numpy: bool) -> None:
    """An image, or every frame of a sequence, has at least one row, column and channel."""
    if 0 in shape[-3:]:
        layout = ("T" if len(shape) == 4 else "") + ("HWC" if numpy else "CHW")
        raise ValueError(
            f"augmentations need an image with pixels; received shape {shape} ({layout}), "
            "which has no pixels (a height, width or channel count of 0). Leave empty "
            "images out of the data (check the files or the crop that produced them)"
        )


def _check_layout(shape: tuple[int, ...], numpy: bool) -> None:
    """Refuse a tensor laid out as HWC (THWC) or an array laid out as CHW (TCHW).

    An axis of 1 to 4 at the channels' place of the other layout, with more than 4 at the
    documented channel axis, is read as the swapped layout: augmenting it as given would
    flip, crop or blur across the colour channels without any error.
    """
    first, last = shape[-3], shape[-1]
    seq = len(shape) == 4
    if not numpy and last in _FEW_CHANNELS and first not in _FEW_CHANNELS:
        order = "(0, 3, 1, 2)" if seq else "(2, 0, 1)"
        raise ValueError(
            f"augmentations take a torch tensor as {'T x ' if seq else ''}C x H x W; "
            f"received shape {shape}, which is {'T x ' if seq else ''}H x W x C ({last} "
            "channels last, as torch.from_numpy(np.asarray(pil_image)) or a video reader "
            f"gives). Pass x.permute{order}, or the numpy array itself (HWC)"
        )
    if numpy and first in _FEW_CHANNELS and last not in _FEW_CHANNELS:
        order = "(0, 2, 3, 1)" if seq else "(1, 2, 0)"
        raise ValueError(
            f"augmentations take a numpy array as {'T x ' if seq else ''}H x W x C; "
            f"received shape {shape}, which is {'T x ' if seq else ''}C x H x W ({first} "
            f"channels first). Pass np.ascontiguousarray(x.transpose{order}), or "
            "torch.from_numpy(x) (a CHW tensor)"
        )


def check_input(x: Any) -> None:
    """``x`` is a numpy HWC / THWC array or a torch CHW / TCHW tensor with pixels."""
    if not isinstance(x, np.ndarray | torch.Tensor):
        hint = (
            "; a sample dict? Augment one column: PackedDataset(..., transform="
            "{'image': aug}), or item['image'] = aug(item['image'])"
            if isinstance(x, dict)
            else "; convert it first, e.g. np.asarray(pil_image)"
        )
        raise TypeError(
            f"augmentations take a numpy HWC array or a torch CHW tensor, got "
            f"{type(x).__name__}{hint}"
        )
    if x.ndim not in (3, 4):
        raise ValueError(
            f"expected an image (HWC array / CHW tensor) or a sequence (THWC / TCHW), "
            f"got shape {tuple(x.shape)}"
            + (
                "; for a grayscale HxW image add a channel axis: x[..., None] (array) "
                "or x[None] (tensor)"
                if x.ndim == 2
                else ""
            )
        )
    numpy = isinstance(x, np.ndarray)
    _check_pixels(tuple(x.shape), numpy)
    _check_layout(tuple(x.shape), numpy)


class Img:
    """Internal form: float32 tensor ``TxCxHxW`` plus what is needed to convert back.

    ``scale`` is the value range (an integer dtype's ``max - min``: 255 for uint8 and int8,
    65535 for uint16 and int16; 1 for floats), ``black`` its lowest value (``min``: -128 for
    int8, 0 for unsigned and float images) and ``limits`` the range the result is clipped
    to: an integer dtype's own range (no wrap-around), ``[0, 1]`` for a float image whose
    values lie there, none otherwise. Integers wider than 16 bits and float64 images are held as
    float64, so that every int32 value survives and a flip or crop of float64 is exact.
    """

    def __init__(self, x: Any) -> None:
        check_input(x)
        self.numpy = isinstance(x, np.ndarray)
        self.seq = x.ndim == 4
        if self.numpy:
            x = np.ascontiguousarray(x)
            x = x if x.flags.writeable else x.copy()  # torch warns on read-only arrays (PIL's)
        t = torch.from_numpy(x) if self.numpy else x
        if self.numpy:
            t = t.movedim(-1, -3)
        if t.dtype == torch.bool or t.dtype.is_complex:
            raise TypeError(
                f"augmentations take uint8, other integer or float images, got {t.dtype}; "
                "convert it first, e.g. x.astype(np.uint8) * 255 for a boolean mask"
            )
        self.dtype = t.dtype
        self.limits: tuple[float, float] | None
        work = torch.float32
        if t.dtype.is_floating_point:
            work = torch.float64 if t.dtype == torch.float64 else torch.float32  # kept exact
            self.scale, self.black = 1.0, 0.0
            seen = t.detach()  # reading the range is no step of the graph: no grad warning
            unit = seen.numel() > 0 and float(seen.min()) >= 0 and float(seen.max()) <= 1
            self.limits = (0.0, 1.0) if unit else None
        else:
            info = torch.iinfo(t.dtype)  # signed too: int8 is -128..127, black at -128
            self.scale, self.black = float(info.max) - float(info.min), float(info.min)
            self.limits = (float(info.min), float(info.max))
            work = torch.float64 if info.bits > 16 else torch.float32  # int32 needs 32 bits
        self.t = (t if self.seq else t.unsqueeze(0)).to(work)

    def result(self) -> Any:
        t = self.t if self.seq else self.t[0]
        if not self.dtype.is_floating_point:
            t = t.round()
        if self.limits is not None:
            t = t.clamp(*self.limits)
        if t.dtype != self.dtype:
            t = t.to(self.dtype)
        if self.numpy:
            return np.ascontiguousarray(t.movedim(-3, -1).numpy())
        return t.contiguous()
