"""nebulgym's documented names over :mod:`scramjet.accel`.

Change only the import line of nebulgym code; both of nebulgym's paths exist::

    from scramjet.compat.nebulgym import patch_torch_module, patch_dataset
    from scramjet.compat.nebulgym.annotations.torch_annotations import patch_torch_module

What differs, and why (details in docs/acceleration.md):

- Decorators return a same-named subclass instead of rewriting the class or ``__new__``:
  hooks fire, ``isinstance`` and pickling (spawn workers) work, train/eval switches hold.
- ``patch_backprop`` defaults to True here, as nebulgym documents it (the core
  :func:`scramjet.accel.accelerate_model` keeps it off: it trades accuracy for speed);
  when on, it never starves small layers or the head.
- Failed backends are dropped once with one warning; every backend is checked against eager.
- ``max_memory_size`` is enforced (spill to disk beyond it); ``preloaded_data`` is the
  number of background preloaders that decode ahead of the loop: forked processes on Linux,
  threads elsewhere (see :mod:`scramjet.accel._preload`), at most one per core the
  DataLoader readers leave free (at least one).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from torch.utils.data import Dataset

from scramjet.accel._engine import AccelerationWarning
from scramjet.accel.dataset import CachedDataset
from scramjet.accel.dataset import accelerate_dataset as _accelerate_dataset
from scramjet.accel.model import TrainingLearner
from scramjet.accel.model import accelerate_model as _accelerate_model
from scramjet.runtime.stacklevel import user_stacklevel

T = TypeVar("T")


def _no_class(name: str, value: object, first: str) -> None:
    """A class where the first argument belongs: the decorator was used without ``()``."""
    if isinstance(value, type):
        raise TypeError(
            f"@{name} was applied to {value.__name__} without parentheses, so the class "
            f"was taken as {first}. Write @{name}() (or with arguments, e.g. "
            f"@{name}({_ARGS_EXAMPLE[name]}))."
        )


_ARGS_EXAMPLE = {
    "accelerate_model": "backends=['PYTORCH']",
    "patch_torch_module": "backends=['PYTORCH']",
    "accelerate_dataset": "max_memory_size=2 * 1024**3",
    "patch_dataset": "max_memory_size=2 * 1024**3",
}


def _model_decorator(
    name: str, patch_backprop: Any, backends: Any, reduce_memory: bool | None
) -> Callable[[type[T]], type[T]]:
    _no_class(name, patch_backprop, "patch_backprop")
    # nebulgym's first parameter is patch_backprop; a list (or a name) first is the
    # backends, as this layer's earlier signature and nebulgym's document order had it.
    if isinstance(patch_backprop, str | list | tuple) and (
        backends is None or isinstance(backends, bool)
    ):
        patch_backprop, backends = (True if backends is None else backends), patch_backprop
    elif isinstance(patch_backprop, bool) and isinstance(backends, bool):
        # nebulgym's second positional parameter is reduce_memory (backends came by keyword).
        _reduce_memory_once(name, backends, reduce_memory)
        reduce_memory, backends = backends, None
    _warn_reduce_memory(name, bool(reduce_memory))
    if not isinstance(patch_backprop, bool):
        raise TypeError(
            f"@{name}(): patch_backprop must be True or False; received {patch_backprop!r}. "
            f"Pass backends by keyword, e.g. @{name}(patch_backprop=False, "
            "backends=['PYTORCH'])."
        )
    return _accelerate_model(backends=backends, patch_backprop=patch_backprop)  # type: ignore[no-any-return]


def _reduce_memory_once(name: str, positional: bool, by_keyword: bool | None) -> None:
    """nebulgym's ``reduce_memory`` both second and by keyword: Python's own error there."""
    if by_keyword is not None:
        raise TypeError(
            f"@{name}(): reduce_memory given twice, as the second argument ({positional!r}) "
            f"and as reduce_memory={by_keyword!r}. Keep one, e.g. @{name}(True, {by_keyword!r})."
        )


def _warn_reduce_memory(name: str, reduce_memory: bool) -> None:
    """nebulgym's ``reduce_memory`` (Gist): ``False`` is its default, ``True`` is not done."""
    if reduce_memory:
        warnings.warn(
            f"@{name}(patch_backprop, reduce_memory=True): nebulgym's Gist memory reduction "
            "(8-bit activations kept for backward) is not implemented here; the model trains "
            "with its exact backward and usual memory. To save activation memory, use "
            "torch.utils.checkpoint on its blocks or a smaller batch; pass False as the second "
            "argument to silence this warning.",
            AccelerationWarning,
            stacklevel=user_stacklevel(),
        )


def accelerate_model(
    patch_backprop: bool = True,
    backends: Sequence[str] | None = None,
    *,
    reduce_memory: bool | None = None,
) -> Callable[[type[T]], type[T]]:
    """Class decorator with nebulgym's signature; see :func:`scramjet.accel.accelerate_model`.

    Args:
        patch_backprop: meProp sparse backward, on by default as in nebulgym (head and
            small layers stay dense); ``False`` keeps the exact backward. nebulgym's first
            positional parameter: ``@accelerate_model(False)`` turns it off. A list of
            backends given first is taken as ``backends``.
        backends: ``"PYTORCH"``, ``"COMPILE"``, ``"ONNXRUNTIME"``, ``"RAMMER"`` in priority
            order (``None`` = the measured default for the model's device). A bool here is
            nebulgym's second positional parameter, ``reduce_memory`` (Gist activation
            compression, not implemented: ``True`` warns once with an
            :class:`~scramjet.accel.AccelerationWarning` and trains with the exact backward).
        reduce_memory: the same nebulgym parameter given by keyword (``None`` = False);
            giving it both ways is a ``TypeError``, as in nebulgym.

    Returns:
        A decorator returning a same-named subclass.
    """
    return _model_decorator("accelerate_model", patch_backprop, backends, reduce_memory)


def patch_torch_module(
    patch_backprop: bool = True,
    backends: Sequence[str] | None = None,
    *,
    reduce_memory: bool | None = None,
) -> Callable[[type[T]], type[T]]:
    """nebulgym's older name for :func:`accelerate_model`."""
    return _model_decorator("patch_torch_module", patch_backprop, backends, reduce_memory)


def accelerate_dataset(
    preloaded_data: int = 0, max_memory_size: int | None = None
) -> Callable[[type[T]], type[T]]:
    """Class decorator with nebulgym's signature; see :func:`scramjet.accel.accelerate_dataset`.

    Args:
        preloaded_data: background preloaders (processes on Linux, sized to the free cores).
        max_memory_size: bytes the in-memory cache may hold; beyond it samples spill to disk.

    Returns:
        A decorator returning a same-named subclass.
    """
    _no_class("accelerate_dataset", preloaded_data, "preloaded_data")
    return _accelerate_dataset(preloaded_data=preloaded_data, max_memory_size=max_memory_size)


def patch_dataset(
    preloaded_data: int = 0, max_memory_size: int | None = None
) -> Callable[[type[T]], type[T]]:
    """nebulgym's older name for :func:`accelerate_dataset`."""
    _no_class("patch_dataset", preloaded_data, "preloaded_data")
    return _accelerate_dataset(preloaded_data=preloaded_data, max_memory_size=max_memory_size)


class NebulDataset(CachedDataset):
    """nebulgym's dataset wrapper: ``NebulDataset(input_data, preloaded_data, max_memory_size)``.

    Args:
        input_data: the map-style dataset to cache.
        preloaded_data: background preloaders (processes on Linux, sized to the free cores).
        max_memory_size: bytes the in-memory cache may hold; beyond it samples spill to disk.

    Example:
        >>> from scramjet.compat.nebulgym import NebulDataset
        >>> NebulDataset([10, 20, 30], max_memory_size=1 << 16)[1]
        20
    """

    def __init__(
        self,
        input_data: Dataset[Any] | Sequence[Any],
        preloaded_data: int = 0,
        max_memory_size: int | None = None,
    ) -> None:
        super().__init__(input_data, preloaded_data=preloaded_data, max_memory_size=max_memory_size)


__all__ = [
    "NebulDataset",
    "TrainingLearner",
    "accelerate_dataset",
    "accelerate_model",
    "patch_dataset",
    "patch_torch_module",
]
