"""Seeded augmentations for images and frame sequences.

Every augmentation works on

- numpy ``uint8`` arrays in HWC layout (``TxHxWxC`` for sequences), and
- torch tensors in CHW layout (``TxCxHxW`` for sequences), of an integer dtype (``uint8``,
  ``uint16``, signed ``int8`` ... ``int32``) or float.

The output has the input's type, layout and dtype (except :class:`Normalize`, which
returns float). Integer images are clipped to their dtype's range (no wrap-around), and
signed ones use it whole: black is the dtype's lowest value (-128 for int8); float
images with values in ``[0, 1]`` stay in ``[0, 1]``, other float images are not clipped.
Random parameters are drawn once per call from a numpy ``Generator`` and
applied to every frame of a sequence, so the frames of one clip stay consistent.

Reproducibility: give an augmentation (or a :class:`Compose`) a ``seed``, then call it
with the sample ``index`` (and ``epoch``): the draw depends only on ``(seed, epoch,
index)``, whatever the worker, process or call order. :class:`scramjet.data.PackedDataset`
passes both automatically. Code that cannot pass them (a function on the whole sample that
calls the augmentation inside, as nebulae's ``prep_fn`` does) runs under
:func:`sample_context`, which supplies them: ``PackedDataset`` and nebulae's ``Tank`` do
this for their transforms. A generator can also be passed explicitly as ``rng=``.

Example:
    >>> import numpy as np
    >>> aug = Compose(Flip(), Crop(area=(0.5, 1.0)), Brighten(0.2), seed=7)
    >>> img = np.zeros((32, 32, 3), np.uint8)
    >>> np.array_equal(aug(img, index=3), aug(img, index=3))
    True
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import math
import numbers
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from scramjet.data import _augment_args as _args
from scramjet.data._augment_input import Img as _Img

__all__ = [
    "Augmentation",
    "Blur",
    "Brighten",
    "Compose",
    "Contrast",
    "Crop",
    "Flip",
    "Hue",
    "Noise",
    "Normalize",
    "Resize",
    "Rotate",
    "Sample",
    "Saturate",
    "sample_context",
]

_LUMA = torch.tensor([0.299, 0.587, 0.114])


class _Sample:
    """The sample being transformed: its index, epoch and seeded calls made so far."""

    def __init__(self, index: int, epoch: int) -> None:
        self.index, self.epoch = index, epoch
        self.calls: dict[int, int] = {}  # id(augmentation) -> calls without an index


_SAMPLE: contextvars.ContextVar[_Sample | None] = contextvars.ContextVar(
    "scramjet_augment_sample", default=None
)


@contextlib.contextmanager
def sample_context(index: int, epoch: int = 0) -> Iterator[None]:
    """Make seeded augmentations called inside draw per sample, as if given ``index``.

    Inside the block, an augmentation with a ``seed`` that is called without ``index``
    or ``rng`` draws from ``(seed, epoch, index)``, exactly like ``aug(x, index=index,
    epoch=epoch)``; a second call of the same object in the same block draws the next,
    equally reproducible, parameters (two views of one sample differ). The draws depend
    only on the sample, never on the worker process or the order of calls.
    :class:`scramjet.data.PackedDataset` and nebulae's ``Tank`` run their transforms in
    this context; use it in a Dataset of your own.

    Args:
        index: the sample's index in its dataset.
        epoch: the epoch, mixed into the seed.

    Example:
        >>> import numpy as np
        >>> aug = Compose(Flip(), Brighten(0.5), seed=3)
        >>> img = np.full((4, 4, 3), 100, np.uint8)
        >>> with sample_context(7, epoch=1):
        ...     inside = aug(img)
        >>> np.array_equal(inside, aug(img, index=7, epoch=1))
        True
    """
    token = _SAMPLE.set(_Sample(_args.count(index, "index"), _args.count(epoch, "epoch")))
    try:
        yield
    finally:
        _SAMPLE.reset(token)


class Augmentation:
    """Base class: draw parameters with :meth:`params`, apply them with :meth:`apply`.

    Args:
        p: probability of applying the augmentation on a call.
        seed: seed for reproducible draws (see the module docs).
    """

    def __init__(self, p: float = 1.0, seed: int | None = None) -> None:
        self.p = _args.probability(p)
        self.seed = _args.rng_seed(seed)
        self._gen: np.random.Generator | None = None

    def _rng(self, rng: np.random.Generator | None, index: int | None, epoch: int) -> Any:
        if rng is not None:
            if not isinstance(rng, np.random.Generator):
                raise TypeError(
                    f"{type(self).__name__}: rng must be a numpy Generator; received "
                    f"{type(rng).__name__} {rng!r:.60}. Pass rng=np.random.default_rng(seed), "
                    f"or give the augmentation seed=... instead."
                )
            return rng
        if self.seed is None:
            return np.random.default_rng()  # fresh OS entropy: never shared by forked workers
        if index is not None:
            return np.random.default_rng([self.seed, epoch, index])
        sample = _SAMPLE.get()
        if sample is not None:  # inside sample_context: per sample, like an explicit index
            calls = sample.calls.get(id(self), 0)
            sample.calls[id(self)] = calls + 1
            key = [self.seed, sample.epoch, sample.index] + ([calls] if calls else [])
            return np.random.default_rng(key)
        if self._gen is None:
            self._gen = np.random.default_rng(self.seed)
        return self._gen

    def __call__(
        self,
        x: Any,
        *,
        rng: np.random.Generator | None = None,
        index: int | None = None,
        epoch: int = 0,
    ) -> Any:
        """Augment an image or a sequence.

        Args:
            x: numpy HWC / THWC array or torch CHW / TCHW tensor.
            rng: generator to draw from (overrides the seed).
            index: sample index, for per-sample reproducible draws with ``seed``
                (default: the index of the enclosing :func:`sample_context`, if any).
            epoch: epoch mixed into the seed with ``index``.
        """
        if index is not None:  # checked on every call, not only where a seed uses it
            index = _args.count(index, "index")
        epoch = _args.count(epoch, "epoch")
        img = _Img(x)
        self.forward(img, self._rng(rng, index, epoch))
        return img.result()

    def forward(self, img: _Img, rng: np.random.Generator) -> None:
        """Draw parameters once and apply them in place to every frame of ``img``."""
        if self.p < 1.0 and rng.random() >= self.p:
            return
        img.t = self.apply(img, self.params(rng, img))

    def params(self, rng: np.random.Generator, img: _Img) -> Any:
        """Random parameters for one call (None for deterministic ops)."""
        return None

    def apply(self, img: _Img, params: Any) -> torch.Tensor:
        """Apply ``params`` to ``img.t`` (``TxCxHxW`` float) and return the new tensor."""
        raise NotImplementedError

    def __repr__(self) -> str:
        """The call that makes this augmentation: its constructor's arguments, as held."""
        args = []
        for name, param in list(inspect.signature(type(self).__init__).parameters.items())[1:]:
            if param.kind is inspect.Parameter.VAR_POSITIONAL:  # Compose's ops
                args += [repr(op) for op in getattr(self, name)]
            elif hasattr(self, name):
                args.append(f"{name}={getattr(self, name)!r}")
        return f"{type(self).__name__}({', '.join(args)})"


class Compose(Augmentation):
    """Apply augmentations in order, from one generator per call.

    Args:
        *ops: augmentations (a single list is accepted too).
        seed: seed for reproducible draws; the ops' own seeds are not used inside (without
            a seed here, seeded ops make it warn: its draws are fresh every call).
    """

    def __init__(self, *ops: Augmentation, seed: int | None = None) -> None:
        super().__init__(1.0, seed)
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = tuple(ops[0])
        for op in ops:
            if not isinstance(op, Augmentation):
                raise TypeError(f"Compose takes scramjet.data.augment objects, got {op!r}")
        self.ops = list(ops)
        seeds = [op.seed for op in ops if op.seed is not None]
        if seed is None and seeds:
            from scramjet.runtime.stacklevel import user_stacklevel

            name = type(self).__name__
            seeded = ", ".join(
                f"{type(op).__name__}(seed={op.seed})" for op in ops if op.seed is not None
            )
            warnings.warn(
                f"{name}(seed=None) draws fresh parameters every call: the seeds of "
                f"{seeded} are not used inside it. For reproducible draws give it the "
                f"seed: {name}(..., seed={seeds[0]})",
                UserWarning,
                stacklevel=user_stacklevel(),
            )

    def forward(self, img: _Img, rng: np.random.Generator) -> None:
        for op in self.ops:
            op.forward(img, rng)


class Flip(Augmentation):
    """Flip horizontally and/or vertically, each with probability ``p``."""

    def __init__(
        self,
        horizontal: bool = True,
        vertical: bool = False,
        p: float = 0.5,
        seed: int | None = None,
    ) -> None:
        super().__init__(p, seed)
        hint = (
            ". A probability goes in p=, e.g. Flip(p=1.0) flips every call "
            "(Flip(1.0) is Flip(horizontal=1.0))"
        )
        self.horizontal = _args.flag(horizontal, "horizontal", hint)
        self.vertical = _args.flag(vertical, "vertical", hint)

    def forward(self, img: _Img, rng: np.random.Generator) -> None:
        """Draw each direction's flip with probability ``p`` (no draw for the whole call)."""
        img.t = self.apply(img, self.params(rng, img))

    def params(self, rng: np.random.Generator, img: _Img) -> tuple[bool, bool]:
        h, v = rng.random() < self.p, rng.random() < self.p
        return h and self.horizontal, v and self.vertical

    def apply(self, img: _Img, params: tuple[bool, bool]) -> torch.Tensor:
        dims = [d for d, on in ((-1, params[0]), (-2, params[1])) if on]
        return img.t.flip(dims) if dims else img.t


def _resize(t: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    if tuple(t.shape[-2:]) == tuple(size):
        return t
    return F.interpolate(t, size=size, mode="bilinear", align_corners=False, antialias=True)


class Crop(Augmentation):
    """Random crop with an area fraction and an aspect ratio drawn from ranges, resized.

    Where no crop inside both ranges is drawn in 10 tries (a wide or tall image with a
    large ``area``), the crop is the largest one whose ratio is in ``ratio``.

    Args:
        area: range of the crop's area as a fraction of the image.
        ratio: range of the crop's width/height ratio (drawn log-uniformly).
        size: output ``(height, width)``; default: the input size.
    """

    def __init__(
        self,
        area: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        size: tuple[int, int] | None = None,
        p: float = 1.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(p, seed)
        area, ratio = _args.pair(area, "area"), _args.pair(ratio, "ratio")
        if not 0 < area[0] <= area[1] <= 1:
            raise ValueError(f"area must satisfy 0 < low <= high <= 1, got {area}")
        if not 0 < ratio[0] <= ratio[1]:
            raise ValueError(f"ratio must satisfy 0 < low <= high, got {ratio}")
        self.area, self.ratio = area, ratio
        self.size = None if size is None else _args.out_size(size)

    def params(self, rng: np.random.Generator, img: _Img) -> tuple[int, int, int, int]:
        height, width = img.t.shape[-2:]
        for _ in range(10):
            target = rng.uniform(*self.area) * height * width
            aspect = math.exp(rng.uniform(math.log(self.ratio[0]), math.log(self.ratio[1])))
            w = round(math.sqrt(target * aspect))
            h = round(math.sqrt(target / aspect))
            if 0 < w <= width and 0 < h <= height:
                return (
                    int(rng.integers(0, height - h + 1)),
                    int(rng.integers(0, width - w + 1)),
                    h,
                    w,
                )
        # No fit in 10 draws (a wide or tall image, a large area range): the largest crop
        # whose ratio is in range, at a random place; the whole image if its own ratio is.
        aspect = min(max(width / height, self.ratio[0]), self.ratio[1])
        w = max(1, min(int(width), round(height * aspect)))
        h = max(1, min(int(height), round(w / aspect)))
        return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w

    def forward(self, img: _Img, rng: np.random.Generator) -> None:
        super().forward(img, rng)
        if self.size is not None:  # a crop skipped by p still gives `size`: batches collate
            img.t = _resize(img.t, self.size)

    def apply(self, img: _Img, params: tuple[int, int, int, int]) -> torch.Tensor:
        top, left, h, w = params
        out = img.t[..., top : top + h, left : left + w]
        return _resize(out, self.size or (img.t.shape[-2], img.t.shape[-1]))


class Rotate(Augmentation):
    """Rotate by an angle (degrees) drawn from ``degrees`` (``d`` means ``(-d, d)``)."""

    def __init__(
        self, degrees: float | tuple[float, float] = 15.0, p: float = 1.0, seed: int | None = None
    ) -> None:
        super().__init__(p, seed)
        self.degrees = _args.span(degrees, 0.0, "degrees")

    def params(self, rng: np.random.Generator, img: _Img) -> float:
        return float(rng.uniform(*self.degrees))

    def apply(self, img: _Img, params: float) -> torch.Tensor:
        t = img.t
        h, w = t.shape[-2:]
        c, s = math.cos(math.radians(params)), math.sin(math.radians(params))
        # rotation in pixel space, written in the normalised coordinates of affine_grid
        theta = torch.tensor(
            [[c, -s * h / w, 0.0], [s * w / h, c, 0.0]], dtype=t.dtype, device=t.device
        )
        grid = F.affine_grid(theta.expand(t.shape[0], 2, 3), list(t.shape), align_corners=False)
        # outside the frame is black: the dtype's lowest value (-128 for int8, 0 unsigned)
        out = F.grid_sample(
            t - img.black, grid, mode="bilinear", padding_mode="zeros", align_corners=False
        )
        return out + img.black


def _gray(t: torch.Tensor) -> torch.Tensor:
    if t.shape[-3] == 1:
        return t
    return (t * _LUMA.to(t.device).view(3, 1, 1)).sum(dim=-3, keepdim=True)


def _colours(t: torch.Tensor, fn: Any, name: str, any_channels: bool = False) -> torch.Tensor:
    """``fn`` on the colour channels of ``t``; the alpha channel of a gray + alpha (2) or
    RGBA (4) image is kept as it is. Other counts than 1 to 4 are an error unless
    ``any_channels`` (``fn`` then sees every channel)."""
    channels = t.shape[-3]
    if channels in (2, 4):
        return torch.cat([fn(t[:, :-1]), t[:, -1:]], dim=-3)
    if channels in (1, 3) or any_channels:
        out: torch.Tensor = fn(t)
        return out
    raise ValueError(
        f"{name} works on images with 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA) "
        f"channels; received {channels} channels (shape {tuple(t.shape[1:])} as CxHxW). "
        "Pass the colour channels only, e.g. x[..., :3] for an HWC array"
    )


class Brighten(Augmentation):
    """Multiply intensities by a factor drawn from ``factor`` (``d`` means ``(1-d, 1+d)``).

    Intensity is the distance from black, the dtype's lowest value: -128 for int8 images,
    -32768 for int16, 0 for unsigned and float ones."""

    def __init__(
        self, factor: float | tuple[float, float] = 0.2, p: float = 1.0, seed: int | None = None
    ) -> None:
        super().__init__(p, seed)
        self.factor = _args.span(factor, 1.0, "factor")
        if self.factor[0] < 0:
            raise ValueError(
                f"{type(self).__name__}(factor={factor!r}) draws factors from {self.factor}, "
                "below 0 (a negative factor blackens or inverts the image); a single number d "
                "means (1 - d, 1 + d), so pass d <= 1 or a pair (low, high) with low >= 0, "
                "such as (0.5, 2.0)"
            )

    def params(self, rng: np.random.Generator, img: _Img) -> float:
        return float(rng.uniform(*self.factor))

    def apply(self, img: _Img, params: float) -> torch.Tensor:
        black = img.black
        return _colours(
            img.t, lambda t: (t - black) * params + black, type(self).__name__, any_channels=True
        )


class Contrast(Brighten):
    """Scale the distance of every pixel from the frame's mean gray level."""

    def apply(self, img: _Img, params: float) -> torch.Tensor:
        def contrast(t: torch.Tensor) -> torch.Tensor:
            mean = _gray(t).mean(dim=(-3, -2, -1), keepdim=True)
            return (t - mean) * params + mean

        return _colours(img.t, contrast, "Contrast")


class Saturate(Brighten):
    """Scale the distance of every pixel from its own gray level (gray images: unchanged)."""

    def apply(self, img: _Img, params: float) -> torch.Tensor:
        def saturate(t: torch.Tensor) -> torch.Tensor:
            gray = _gray(t)
            return (t - gray) * params + gray

        return _colours(img.t, saturate, "Saturate")


class Hue(Augmentation):
    """Rotate hue by a fraction of a full turn drawn from ``shift`` (``d``: ``(-d, d)``),
    in the direction of the hue wheel (a positive shift turns red towards yellow, as HSV
    hue does); gray images are left as they are."""

    def __init__(
        self, shift: float | tuple[float, float] = 0.05, p: float = 1.0, seed: int | None = None
    ) -> None:
        super().__init__(p, seed)
        self.shift = _args.span(shift, 0.0, "shift")

    def params(self, rng: np.random.Generator, img: _Img) -> float:
        return float(rng.uniform(*self.shift))

    def apply(self, img: _Img, params: float) -> torch.Tensor:
        # rotate the chroma plane of YIQ: a 3x3 linear map, so one matmul per pixel
        to_yiq = torch.tensor(
            [[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]]
        )
        a = -2 * math.pi * params  # I towards Q is against the hue wheel (red -> yellow)
        rot = torch.tensor(
            [[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]]
        )
        m = (torch.linalg.inv(to_yiq) @ rot @ to_yiq).to(img.t.device, img.t.dtype)

        def hue(t: torch.Tensor) -> torch.Tensor:  # a gray image has no hue to turn
            return t if t.shape[-3] == 1 else torch.einsum("ij,tjhw->tihw", m, t)

        return _colours(img.t, hue, "Hue")


class Blur(Augmentation):
    """Gaussian blur with a sigma (pixels) drawn from ``sigma``, a ``(low, high)`` range
    or one number for a fixed sigma; sigmas are >= 0 (0 leaves the image as it is).

    The kernel reaches ``ceil(3 * sigma)`` pixels, edges reflected; along an axis shorter
    than that it is cut to the axis (a 1-pixel-high image is blurred along its width)."""

    def __init__(
        self,
        sigma: float | tuple[float, float] = (0.1, 2.0),
        p: float = 0.5,
        seed: int | None = None,
    ) -> None:
        super().__init__(p, seed)
        one = _args.is_number(_args.finite(sigma, "sigma"))  # one sigma, not (-sigma, sigma)
        span = _args.span((sigma, sigma) if one else sigma, 0.0, "sigma")
        self.sigma = _args.nonnegative(span, sigma, "sigma")

    def params(self, rng: np.random.Generator, img: _Img) -> float:
        return float(rng.uniform(*self.sigma))

    def apply(self, img: _Img, params: float) -> torch.Tensor:
        t = img.t
        if params <= 0:
            return t
        c = t.shape[-3]
        for dim in (-1, -2):  # width, then height: each as far as its size allows
            radius = min(max(1, math.ceil(3 * params)), t.shape[dim] - 1)  # reflect: < size
            if radius < 1:
                continue
            x = torch.arange(-radius, radius + 1, dtype=t.dtype, device=t.device)
            k = torch.exp(-(x**2) / (2 * params**2))
            k = (k / k.sum()).view((1, 1, 1, -1) if dim == -1 else (1, 1, -1, 1))
            pad = (radius, radius, 0, 0) if dim == -1 else (0, 0, radius, radius)
            t = F.conv2d(F.pad(t, pad, mode="reflect"), k.expand(c, -1, -1, -1), groups=c)
        return t


class Noise(Augmentation):
    """Add Gaussian noise; ``std`` is a fraction of the value range (an integer dtype's
    ``max - min``: 255 for uint8 and int8, 65535 for uint16 and int16; 1 for floats).

    The same noise field is added to every frame of a sequence.
    """

    def __init__(
        self,
        std: float | tuple[float, float] = (0.0, 0.05),
        p: float = 1.0,
        seed: int | None = None,
    ) -> None:
        super().__init__(p, seed)
        one = _args.is_number(_args.finite(std, "std"))  # (0, std)
        given: Any = std
        if one and float(given) < 0:
            _args.nonnegative((float(given), 0.0), std, "std")
        span = _args.span((0.0, std) if one else std, 0.0, "std")
        self.std = _args.nonnegative((min(span), span[1]), std, "std")  # Noise(-0.1) too

    def params(self, rng: np.random.Generator, img: _Img) -> tuple[float, int]:
        return float(rng.uniform(*self.std)), int(rng.integers(0, 2**62))

    def apply(self, img: _Img, params: tuple[float, int]) -> torch.Tensor:
        std, seed = params
        gen = torch.Generator().manual_seed(seed)
        noise = torch.randn(img.t.shape[1:], generator=gen) * (std * img.scale)  # CPU draws:
        noise = noise.to(img.t.device)  # the same field on every device
        return img.t + noise


class Resize(Augmentation):
    """Resize to ``(height, width)`` (bilinear, antialiased)."""

    def __init__(self, size: int | tuple[int, int]) -> None:
        super().__init__(1.0, None)
        self.size = _args.out_size(size)

    def apply(self, img: _Img, params: Any) -> torch.Tensor:
        return _resize(img.t, self.size)


class Normalize(Augmentation):
    """``((x - low) / range - mean) / std`` per channel; returns float. An integer image's
    ``low`` and ``range`` are its dtype's ``min`` and ``max - min`` (so int8 -128..127, like
    uint8 0..255, becomes 0..1 before ``mean`` and ``std``); a float image's are 0 and 1."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__(1.0, None)
        for name, values in (("mean", mean), ("std", std)):
            ok = isinstance(values, Sequence | np.ndarray) and not isinstance(values, str)
            if not ok or len(values) == 0 or not all(_args.is_number(v) for v in values):
                raise ValueError(
                    f"Normalize: {name} must be a list of numbers, one per channel (or one "
                    f"for all); received {values!r}. Pass e.g. {name}=[{values!r}]"
                )
        if len(mean) > 1 and len(std) > 1 and len(mean) != len(std):
            raise ValueError(
                f"Normalize got {len(mean)} mean values and {len(std)} std values; pass one "
                "value per channel for both (or one value for all channels)"
            )
        if not all(math.isfinite(v) for v in mean):
            raise ValueError(
                f"Normalize: mean values must be finite (a nan or infinite mean makes every "
                f"pixel nan or infinite); received {mean!r}"
            )
        if not all(math.isfinite(v) and v > 0 for v in std):
            raise ValueError(f"Normalize: std values must be finite and > 0; received {std!r}")
        self.mean, self.std = [float(v) for v in mean], [float(v) for v in std]

    def apply(self, img: _Img, params: Any) -> torch.Tensor:
        channels = img.t.shape[-3]
        for name, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (1, channels):
                raise ValueError(
                    f"Normalize got {len(values)} {name} values for an image with {channels} "
                    f"channel(s); pass one value per channel (or one value for all)"
                )
        mean = torch.tensor(self.mean, device=img.t.device).view(-1, 1, 1)
        std = torch.tensor(self.std, device=img.t.device).view(-1, 1, 1)
        out = ((img.t - img.black) / img.scale - mean) / std
        img.dtype, img.scale, img.black, img.limits = torch.float32, 1.0, 0.0, None
        return out


class Sample(Augmentation):
    """Keep one frame in every window of ``theta`` frames, at a random place in the window.

    A sequence of ``T`` frames gives ``ceil(T / theta)`` frames. With ``jitter=False`` the
    first frame of every window is kept.
    """

    def __init__(self, theta: int, jitter: bool = True, seed: int | None = None) -> None:
        super().__init__(1.0, seed)
        if not isinstance(theta, numbers.Integral) or isinstance(theta, bool) or theta < 1:
            raise ValueError(
                f"theta must be a positive int (keep one frame in every theta); received {theta!r}"
            )
        self.theta: int = int(theta)
        self.jitter: bool = _args.flag(jitter, "jitter")

    def params(self, rng: np.random.Generator, img: _Img) -> list[int]:
        if not img.seq:
            c, h, w = img.t.shape[1:]
            shape = f"{(h, w, c)} (HWC)" if img.numpy else f"{(c, h, w)} (CHW)"
            raise ValueError(
                f"Sample works on sequences (THWC arrays / TCHW tensors); received one image "
                f"of shape {shape}. Give it a sequence, or add a frame axis: x[None]"
            )
        total = img.t.shape[0]
        starts = range(0, total, self.theta)
        if not self.jitter:
            return list(starts)
        return [s + int(rng.integers(0, min(self.theta, total - s))) for s in starts]

    def apply(self, img: _Img, params: list[int]) -> torch.Tensor:
        return img.t[params]
