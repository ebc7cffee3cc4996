"""nebulae's Astro names (``nebulae.astro.dock``) over plain PyTorch.

- :class:`Craft`: an ``nn.Module`` whose forward is ``run()`` and which has a ``scope``.
- :class:`Rudder`, :class:`Prober`, :class:`Nozzle`: gradient contexts.
- :func:`coat`, :func:`shell`: values onto and off the current device.
- :func:`autoPad`: "same" padding in ``torch.nn.functional.pad`` order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "Craft",
    "Dense",
    "Law",
    "Nozzle",
    "Prober",
    "Reshape",
    "Rudder",
    "autoPad",
    "coat",
    "shell",
]

_current_device: torch.device | None = None


def current_device() -> torch.device:
    """The device set by the last ``Engine`` (else scramjet's automatic choice)."""
    if _current_device is not None:
        return _current_device
    from scramjet.runtime.devices import default_device

    return default_device()


def set_current_device(device: torch.device | str | None) -> None:
    """Make ``device`` the one :func:`coat` and :meth:`Craft.gear` use (``Engine`` calls it)."""
    global _current_device
    _current_device = None if device is None else torch.device(device)


class Law:
    """nebulae's backend switch. Only PyTorch exists here; ``CORE`` is kept for old scripts."""

    CORE = "pytorch"


class Craft(nn.Module):
    """Base class of networks (nebulae's ``Craft``): define ``run()``, call the module.

    Args:
        scope: Name of the craft; the default base name of its checkpoints.

    Example:
        >>> class Net(Craft):
        ...     def __init__(self, scope="NET"):
        ...         super().__init__(scope)
        ...         self.fc = torch.nn.Linear(4, 2)
        ...     def run(self, x):
        ...         return self.fc(x)
        >>> Net()(torch.zeros(3, 4)).shape
        torch.Size([3, 2])
    """

    def __init__(self, scope: str) -> None:
        super().__init__()
        if not isinstance(scope, str) or not scope:
            raise ValueError(
                f"scope must be a non-empty string naming the craft; received {scope!r}."
            )
        self.scope = scope

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """The forward computation; subclasses define it."""
        raise NotImplementedError(
            f"{type(self).__name__} must define run(self, ...) with its forward computation."
        )

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Calls :meth:`run` (so hooks, DDP and ``torch.compile`` see a normal module)."""
        return self.run(*args, **kwargs)

    def gear(self, engine: Any = None) -> Craft:
        """Move the craft onto the engine's device (or the current device) and return it."""
        device = getattr(engine, "device", None) or current_device()
        return self.to(device)


class Reshape(nn.Module):
    """``Reshape()(x, shape)``: ``x.reshape(shape)`` as a layer."""

    def forward(self, x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        """Reshape ``x`` to ``shape``."""
        return x.reshape(tuple(shape))


class Dense(nn.Linear):
    """``Dense(in_features, out_features)``: a fully connected layer (``nn.Linear``)."""


class Rudder:
    """Context where gradients are computed and flow back into every parameter.

    Example:
        >>> w = torch.ones(2, requires_grad=True)
        >>> with Nozzle():
        ...     with Rudder():
        ...         (w * 2).sum().requires_grad
        True
    """

    def __enter__(self) -> Rudder:
        self._ctx = torch.enable_grad()
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)


class Prober:
    """Context where gradients are computed but not backpropagated into parameters.

    Inside, autograd runs, so gradients with respect to inputs (``x.grad`` of a tensor
    made with ``requires_grad=True``) can be taken; on exit, the ``.grad`` of every
    parameter is put back as it was when the context was entered, so nothing computed
    inside reaches an optimizer step.

    ``Prober()`` covers the parameters of every module called inside the context (seen
    through a forward pre-hook registered for its duration), plus those of ``modules``.
    A parameter used without calling its module (``torch.matmul(x, layer.weight)``)
    is covered only when its module is passed: ``Prober(layer)``.

    Args:
        modules: Modules whose parameters stay untouched even if they are not called
            inside the context.

    Example:
        >>> layer = torch.nn.Linear(2, 1)
        >>> x = torch.ones(1, 2, requires_grad=True)
        >>> with Prober():
        ...     layer(x).sum().backward()
        >>> x.grad is not None, layer.weight.grad is None
        (True, True)
    """

    def __init__(self, *modules: nn.Module) -> None:
        for module in modules:
            if not isinstance(module, nn.Module):
                raise TypeError(
                    f"Prober() takes modules whose parameters must keep their gradients; "
                    f"received {type(module).__name__}. Call Prober() without arguments to "
                    "cover every module run inside it."
                )
        self.modules = modules
        self._saved: dict[int, tuple[nn.Parameter, torch.Tensor | None]] = {}

    def _save(self, params: Iterable[nn.Parameter]) -> None:
        for p in params:
            if id(p) not in self._saved:
                self._saved[id(p)] = (p, None if p.grad is None else p.grad.clone())

    def _seen(self, module: nn.Module, args: Any) -> None:
        self._save(module.parameters(recurse=False))

    def __enter__(self) -> Prober:
        self._saved = {}
        for module in self.modules:
            self._save(module.parameters())
        self._hook = nn.modules.module.register_module_forward_pre_hook(self._seen)
        self._ctx = torch.enable_grad()
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)
        self._hook.remove()
        for param, grad in self._saved.values():
            param.grad = grad
        self._saved = {}


class Nozzle:
    """Context where no gradient is computed (``torch.no_grad``): evaluation, inference."""

    def __enter__(self) -> Nozzle:
        self._ctx = torch.no_grad()
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)


def coat(datum: Any, as_const: bool = True) -> torch.Tensor:
    """Turn a number, array or tensor into a tensor on the current device.

    Args:
        datum: An int, float, sequence, numpy array or tensor.
        as_const: True: a constant (no gradient). False: a trainable leaf tensor
            (``requires_grad=True``; integer data is converted to float32 first).

    Returns:
        The tensor on the device of the last ``Engine`` (else the automatic device).
        Python floats (and lists of them) get torch's default dtype (float32), as with
        ``torch.tensor``; numpy arrays and tensors keep theirs.
    """
    if isinstance(datum, torch.Tensor):
        tensor = datum.detach()
    elif isinstance(datum, np.ndarray | np.generic):
        tensor = torch.as_tensor(datum)  # numpy data keeps its dtype, as torch.from_numpy
    elif isinstance(datum, int | float | bool | list | tuple):
        tensor = torch.as_tensor(_python_array(datum))
        if tensor.dtype == torch.float64 and not _holds_numpy(datum):
            # Python floats: torch's default dtype (float32), as torch.tensor(0.5) gives,
            # so coat([[0.1, 0.2]]) goes into a float32 layer.
            tensor = tensor.to(torch.get_default_dtype())
    else:
        raise TypeError(
            f"coat() takes a number, a sequence, a numpy array or a tensor; received "
            f"{type(datum).__name__}."
        )
    tensor = tensor.to(current_device())
    if not as_const:
        if not tensor.is_floating_point():
            tensor = tensor.float()
        tensor = tensor.clone().requires_grad_(True)
    return tensor


_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)


def _python_array(datum: Any) -> np.ndarray[Any, Any]:
    """A number or (nested) list/tuple as one numeric array, or an error saying why not."""
    kind = type(datum).__name__
    try:
        array = np.asarray(datum)
    except ValueError:  # rows of different lengths
        raise ValueError(
            f"coat() received a ragged {kind}: its rows have different lengths, so it is no "
            "rectangular array. Pad the rows to one length, or coat() each row on its own."
        ) from None
    if array.dtype.kind in "biufc":
        return array
    found = _first_non_number(datum)
    held = f"a {kind} holding {found}" if isinstance(datum, list | tuple) else found
    raise TypeError(
        f"coat() takes numbers (bool, int, float, in int64 range), alone or in nested lists "
        f"of equal lengths; received {held}. Convert "
        "the values to numbers first (e.g. labels to class indices), or keep them out of "
        "coat()."
    )


def _first_non_number(datum: Any) -> str:
    """The first value of a (nested) list that no numeric array can hold, described."""
    if isinstance(datum, list | tuple):
        return next((found for d in datum if (found := _first_non_number(d))), "")
    if isinstance(datum, bool | float | np.generic | torch.Tensor):
        return ""
    if isinstance(datum, int):
        return "" if -(2**63) <= datum < 2**64 else f"the int {datum}, outside int64"
    return f"a {type(datum).__name__} ({datum!r:.40})"


def _holds_numpy(datum: Any) -> bool:
    """Whether a (nested) list or tuple holds numpy values, whose dtype is kept."""
    if isinstance(datum, np.ndarray | np.generic):
        return True
    return isinstance(datum, list | tuple) and any(_holds_numpy(d) for d in datum)


def shell(datum: torch.Tensor, as_np: bool = True) -> Any:
    """Take a tensor off its device: a numpy array (``as_np=True``) or a CPU tensor.

    numpy has no bfloat16 (nor float8): such a tensor becomes a float32 array (every
    value is kept exactly); with ``as_np=False`` the tensor keeps its dtype.

    Example:
        >>> shell(torch.tensor([1.0, 2.0]))
        array([1., 2.], dtype=float32)
    """
    if not isinstance(datum, torch.Tensor):
        raise TypeError(f"shell() takes a tensor; received {type(datum).__name__}.")
    out = datum.detach().cpu()
    if not as_np:
        return out
    if out.is_floating_point() and out.dtype not in _NUMPY_FLOATS:
        out = out.float()  # bfloat16, float8: no numpy dtype; float32 holds their values
    return out.numpy()


def _per_dim(value: int | Sequence[int], n: int, name: str) -> list[int]:
    values = [int(value)] * n if isinstance(value, int) else [int(v) for v in value]
    if len(values) != n or any(v < 1 for v in values):
        raise ValueError(
            f"{name} must be a positive int or {n} positive ints (one per dimension of "
            f"in_size); received {value!r}."
        )
    return values


def autoPad(
    in_size: Sequence[int],
    kernel: int | Sequence[int],
    stride: int | Sequence[int] = 1,
    dilation: int | Sequence[int] = 1,
) -> tuple[int, ...]:
    """Padding for ``F.pad`` that makes a convolution's output ``ceil(in / stride)`` long.

    With stride 1 the output has the input's size ("same" padding). When the total
    padding of a dimension is odd, the extra element goes after (right/bottom/back), as
    in ``Conv2d(padding='same')``.

    Args:
        in_size: Spatial input size, e.g. ``(h, w)`` or ``(d, h, w)``.
        kernel: Kernel size (an int or one per dimension).
        stride: Convolution stride.
        dilation: Kernel dilation.

    Returns:
        ``F.pad`` order, last dimension first: ``(left, right, top, bottom)`` for 2-d,
        ``(left, right, top, bottom, front, back)`` for 3-d.

    Example:
        >>> autoPad((8, 8), (3, 5))
        (2, 2, 1, 1)
    """
    size = [int(s) for s in in_size]
    n = len(size)
    if n == 0 or any(s < 1 for s in size):
        raise ValueError(f"in_size must hold positive sizes, e.g. (h, w); received {in_size!r}.")
    ks, ss, ds = (
        _per_dim(v, n, name)
        for v, name in ((kernel, "kernel"), (stride, "stride"), (dilation, "dilation"))
    )
    pads: list[int] = []
    for length, k, s, d in reversed(list(zip(size, ks, ss, ds))):
        out = math.ceil(length / s)
        total = max((out - 1) * s + (k - 1) * d + 1 - length, 0)
        pads.extend((total // 2, total - total // 2))
    return tuple(pads)
