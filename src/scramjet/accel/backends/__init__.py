"""Backend registry for :func:`scramjet.accel.accelerate_model`.

A backend turns ``forward_fn`` (a callable running the user's forward in eager PyTorch) into
a callable with the same signature and semantics. Builders may raise: the engine catches the
error, drops the backend with one warning and moves to the next one in the user's list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

ForwardFn = Callable[..., Any]


@dataclass
class BuildContext:
    """What a backend builder may look at when it builds.

    Attributes:
        module: the model whose forward is accelerated (the decorated instance, or the
            module held by the wrapper).
        device: device of the model's first parameter or buffer (``cpu`` when it has none).
        options: backend options the user passed (``compile_mode``, ``cuda_graphs`` ...).
    """

    module: torch.nn.Module
    device: torch.device
    options: dict[str, Any] = field(default_factory=dict)


BackendBuilder = Callable[[ForwardFn, BuildContext], ForwardFn]

_REGISTRY: dict[str, BackendBuilder] = {}


def register_backend(name: str, builder: BackendBuilder, *, replace: bool = False) -> None:
    """Register a backend under ``name`` (upper-cased).

    Args:
        name: the name users pass in ``backends=[...]``.
        builder: ``builder(forward_fn, ctx) -> accelerated_fn``; it may raise to say the
            backend cannot be used here.
        replace: allow replacing an existing backend of that name.

    Raises:
        ValueError: the name is already registered and ``replace`` is False.
    """
    key = name.upper()
    if key in _REGISTRY and not replace:
        raise ValueError(f"backend {key!r} is already registered; pass replace=True to override it")
    _REGISTRY[key] = builder


def unregister_backend(name: str) -> None:
    """Remove a backend registered with :func:`register_backend` (no error if absent)."""
    _REGISTRY.pop(name.upper(), None)


def available_backends() -> list[str]:
    """Names accepted in ``backends=[...]``, in registration order."""
    return list(_REGISTRY)


def get_builder(name: str) -> BackendBuilder:
    """Return the builder registered for ``name``.

    Raises:
        ValueError: unknown name; the message lists the valid ones.
    """
    try:
        return _REGISTRY[name.upper()]
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}; expected one of {available_backends()} "
            "(or 'AUTO' for the measured per-device default)"
        ) from None


def _register_builtins() -> None:
    from scramjet.accel.backends.compiled import build_compile
    from scramjet.accel.backends.eager import build_eager
    from scramjet.accel.backends.onnxruntime import build_onnxruntime
    from scramjet.accel.backends.rammer import build_rammer

    for name, fn in (
        ("PYTORCH", build_eager),
        ("COMPILE", build_compile),
        ("ONNXRUNTIME", build_onnxruntime),
        ("RAMMER", build_rammer),
    ):
        register_backend(name, fn, replace=True)


_register_builtins()

__all__ = [
    "BackendBuilder",
    "BuildContext",
    "ForwardFn",
    "available_backends",
    "get_builder",
    "register_backend",
    "unregister_backend",
]
