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
- ``accelerate_model`` / ``patch_torch_module`` take nebulgym's order, ``(patch_backprop,
  reduce_memory, backends)``; backend names given second (this layer's earlier order) are
  read as ``backends``, and backend names given first as ``(backends, patch_backprop)``.
- Failed backends are dropped once with one warning; every backend is checked against eager.
- ``max_memory_size`` is enforced (spill to disk beyond it); ``preloaded_data`` is the
  number of background preloaders that decode ahead of the loop: forked processes on Linux,
  threads elsewhere (see :mod:`scramjet.accel._preload`), at most one per core the
  DataLoader readers leave free (at least one).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar, cast

from torch.utils.data import Dataset

from scramjet.accel._engine import AccelerationWarning
from scramjet.accel.dataset import CachedDataset
from scramjet.accel.dataset import accelerate_dataset as _accelerate_dataset
from scramjet.accel.model import TrainingLearner
from scramjet.accel.model import accelerate_model as _accelerate_model
from scramjet.runtime.stacklevel import user_stacklevel

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")


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


_PARAMETERS = ("patch_backprop", "reduce_memory", "backends")
_ORDINALS = ("first", "second", "third")


def _is_names(value: object) -> bool:
    """Backend names: a list or tuple of them, or one name."""
    return isinstance(value, str | list | tuple)


def _positional_slots(name: str, args: tuple[Any, ...]) -> dict[str, tuple[str, Any]]:
    """Which parameter each positional argument fills, and where it came from.

    nebulgym's order is ``(patch_backprop, reduce_memory, backends)``. This layer's earlier
    call forms stay readable: backend names second are ``backends`` (``(True, ["PYTORCH"])``),
    and backend names first are ``(backends, patch_backprop)`` (``(["PYTORCH"], False)``).
    """
    if args and _is_names(args[0]):
        if len(args) > 2:
            raise TypeError(
                f"@{name}(): backend names first ({args[0]!r}) may be followed by "
                f"patch_backprop only; received {len(args)} positional arguments. Use "
                f"nebulgym's order, e.g. @{name}(True, False, backends={args[0]!r})."
            )
        slots = {"backends": ("first argument", args[0])}
        if len(args) == 2 and args[1] is not None:
            slots["patch_backprop"] = ("second argument", args[1])
        return slots
    slots = {}
    for ordinal, parameter, value in zip(_ORDINALS, _PARAMETERS, args, strict=False):
        if parameter == "reduce_memory" and value is None:
            continue  # the default, as this layer's earlier (patch_backprop, None) had it
        if parameter == "reduce_memory" and _is_names(value):
            parameter = "backends"
        if parameter in slots:
            _given_twice(name, parameter, slots[parameter], f"the {ordinal} argument ({value!r})")
        slots[parameter] = (f"{ordinal} argument", value)
    return slots


def _given_twice(name: str, parameter: str, first: tuple[str, Any], second: str) -> None:
    """Python's "multiple values" error, naming both places the value came from."""
    where, value = first
    raise TypeError(
        f"@{name}(): {parameter} given twice, as the {where} ({value!r}) and as {second}. "
        f"Keep one; nebulgym's order is @{name}(patch_backprop, reduce_memory, "
        "backends=[...]), e.g. "
        f"@{name}(True, False, backends=['PYTORCH'])."
    )


def _read_call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The three parameters of one call of a model decorator, by name."""
    unknown = [key for key in kwargs if key not in _PARAMETERS]
    if unknown:
        raise TypeError(
            f"@{name}() got an unexpected keyword argument {unknown[0]!r}; its parameters "
            f"are patch_backprop, reduce_memory and backends, e.g. "
            f"@{name}(patch_backprop=True, backends=['PYTORCH'])."
        )
    if len(args) > len(_PARAMETERS):
        raise TypeError(
            f"@{name}() takes at most 3 positional arguments (patch_backprop, "
            f"reduce_memory, backends) but {len(args)} were given: {args!r}."
        )
    if args:
        _no_class(name, args[0], "patch_backprop")
    slots = _positional_slots(name, args)
    for key, value in kwargs.items():
        if key in slots:
            _given_twice(name, key, slots[key], f"{key}={value!r}")
    given = {key: value for key, (_, value) in slots.items()}
    return {"patch_backprop": True, "reduce_memory": False, "backends": None, **given, **kwargs}


def _nebulgym_call(decorator: Callable[P, R]) -> Callable[P, R]:
    """Read the arguments before Python binds them, so that every form above is accepted
    and duplicates are reported with both places; the signature shown stays nebulgym's."""

    @functools.wraps(decorator)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        given = _read_call(decorator.__name__, args, kwargs)
        return cast("Callable[..., R]", decorator)(**given)

    return call


def _model_decorator(
    name: str, patch_backprop: Any, reduce_memory: Any, backends: Any
) -> Callable[[type[T]], type[T]]:
    if not isinstance(patch_backprop, bool):
        raise TypeError(
            f"@{name}(): patch_backprop must be True or False; received {patch_backprop!r}. "
            f"Pass backends by keyword, e.g. @{name}(patch_backprop=False, "
            "backends=['PYTORCH'])."
        )
    if not isinstance(reduce_memory, bool | None):
        raise TypeError(
            f"@{name}(): reduce_memory (the second argument, as in nebulgym) must be True "
            f"or False; received {reduce_memory!r}. Backends are names, e.g. "
            f"@{name}(True, False, backends=['PYTORCH'])."
        )
    if isinstance(backends, bool):
        raise TypeError(
            f"@{name}(): backends must be backend names such as ['PYTORCH']; received "
            f"{backends!r}. nebulgym's reduce_memory flag is the second argument or "
            f"reduce_memory={backends!r}."
        )
    _warn_reduce_memory(name, bool(reduce_memory))
    return _accelerate_model(backends=backends, patch_backprop=patch_backprop)  # type: ignore[no-any-return]


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


@_nebulgym_call
def accelerate_model(
    patch_backprop: bool = True,
    reduce_memory: bool = False,
    backends: Sequence[str] | None = None,
) -> Callable[[type[T]], type[T]]:
    """Class decorator with nebulgym's signature; see :func:`scramjet.accel.accelerate_model`.

    Positional arguments follow nebulgym's order, ``@accelerate_model(True, False,
    backends=["PYTORCH"])``. Earlier call forms of this layer still work: backend names
    given second (where ``reduce_memory`` stands) are ``backends``, as in
    ``@accelerate_model(False, ["PYTORCH"])``, and backend names given first are
    ``backends`` followed by ``patch_backprop``, as in ``@accelerate_model(["PYTORCH"], False)``.

    Args:
        patch_backprop: meProp sparse backward, on by default as in nebulgym (head and
            small layers stay dense); ``False`` keeps the exact backward.
        reduce_memory: nebulgym's Gist activation compression, not implemented: ``True``
            warns once with an :class:`~scramjet.accel.AccelerationWarning` and trains with
            the exact backward; ``False`` (nebulgym's default) is silent.
        backends: ``"PYTORCH"``, ``"COMPILE"``, ``"ONNXRUNTIME"``, ``"RAMMER"`` in priority
            order (``None`` = the measured default for the model's device).

    Returns:
        A decorator returning a same-named subclass.

    Raises:
        TypeError: a parameter given twice (positionally and by keyword, or backend names
            both second and third), a flag that is not a bool, or the decorator applied
            without parentheses.
    """
    return _model_decorator("accelerate_model", patch_backprop, reduce_memory, backends)


@_nebulgym_call
def patch_torch_module(
    patch_backprop: bool = True,
    reduce_memory: bool = False,
    backends: Sequence[str] | None = None,
) -> Callable[[type[T]], type[T]]:
    """nebulgym's older name for :func:`accelerate_model`, with the same parameters."""
    return _model_decorator("patch_torch_module", patch_backprop, reduce_memory, backends)


def accelerate_dataset(
    preloaded_data: int = 0, max_memory_size: int | None = None, **options: Any
) -> Callable[[type[T]], type[T]]:
    """Class decorator with nebulgym's signature; see :func:`scramjet.accel.accelerate_dataset`.

    Args:
        preloaded_data: background preloaders (processes on Linux, sized to the free cores).
        max_memory_size: bytes the in-memory cache may hold; beyond it samples spill to disk.
        options: scramjet's own, by keyword: ``transform`` (random augmentations, run
            after the cache), ``probe``, ``spill``, ``cache_dir``.

    Returns:
        A decorator returning a same-named subclass.
    """
    _no_class("accelerate_dataset", preloaded_data, "preloaded_data")
    return _accelerate_dataset(
        preloaded_data=preloaded_data, max_memory_size=max_memory_size, **options
    )


def patch_dataset(
    preloaded_data: int = 0, max_memory_size: int | None = None, **options: Any
) -> Callable[[type[T]], type[T]]:
    """nebulgym's older name for :func:`accelerate_dataset` (the same ``options``)."""
    _no_class("patch_dataset", preloaded_data, "preloaded_data")
    return _accelerate_dataset(
        preloaded_data=preloaded_data, max_memory_size=max_memory_size, **options
    )


class NebulDataset(CachedDataset):
    """nebulgym's dataset wrapper: ``NebulDataset(input_data, preloaded_data, max_memory_size)``.

    Args:
        input_data: the map-style dataset to cache.
        preloaded_data: background preloaders (processes on Linux, sized to the free cores).
        max_memory_size: bytes the in-memory cache may hold; beyond it samples spill to disk.
        options: scramjet's own, by keyword: ``transform``, ``probe``, ``spill``,
            ``cache_dir`` (see :class:`scramjet.accel.CachedDataset`).

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
        **options: Any,
    ) -> None:
        super().__init__(
            input_data, preloaded_data=preloaded_data, max_memory_size=max_memory_size, **options
        )


__all__ = [
    "NebulDataset",
    "TrainingLearner",
    "accelerate_dataset",
    "accelerate_model",
    "patch_dataset",
    "patch_torch_module",
]
