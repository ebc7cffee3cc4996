"""Data-parallel wrappers that keep a ``TTModel``'s ``get_loss``/``get_predictions`` and attributes.

The model's own methods are bound to the wrapper, so ``self(batch)`` inside ``get_loss``
goes through the parallel forward (split across GPUs, gradients synchronised). The
attributes named in the model's ``transfer_model_attributes`` are copied onto the wrapper.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from torch import nn

__all__ = ["TTDataParallel", "TTDistributedDataParallel", "TTParallelBase"]

_DEFAULT_METHODS = ("get_loss", "get_loss_eval", "get_predictions")


def _own_methods(module: nn.Module) -> list[str]:
    """Methods the model's classes define beyond ``nn.Module`` (``forward`` and dunders excepted)."""
    names: list[str] = []
    for cls in type(module).__mro__:
        if cls in (nn.Module, object) or issubclass(nn.Module, cls):
            continue
        for name, value in vars(cls).items():
            own = callable(value) and not name.startswith("__") and name != "forward"
            if own and name not in names and not hasattr(nn.Module, name):
                names.append(name)
    return names


class TTParallelBase:
    """Binds the wrapped model's methods to this wrapper and copies its transferred attributes."""

    def __init__(
        self,
        module: nn.Module | None = None,
        default_model_methods: Sequence[str] = _DEFAULT_METHODS,
    ) -> None:
        if module is None:
            # Reached through DistributedDataParallel's cooperative super().__init__()
            # (Joinable's) before the wrapped model is known; the subclass calls again with it.
            return
        names = [n for n in default_model_methods if hasattr(module, n)]
        names += [n for n in _own_methods(module) if n not in names]
        for name in names:
            function = getattr(type(module), name, None)
            if isinstance(function, types.FunctionType):
                object.__setattr__(self, name, types.MethodType(function, self))
        for name in getattr(module, "transfer_model_attributes", []):
            object.__setattr__(self, name, getattr(module, name))


class TTDataParallel(nn.DataParallel, TTParallelBase):  # type: ignore[type-arg]
    """``torch.nn.DataParallel`` that keeps the model's ``get_loss``/``get_predictions``."""

    def __init__(
        self,
        module: nn.Module,
        default_model_methods: Sequence[str] = _DEFAULT_METHODS,
        **kwargs: Any,
    ) -> None:
        nn.DataParallel.__init__(self, module, **kwargs)
        TTParallelBase.__init__(self, module, default_model_methods)


class TTDistributedDataParallel(nn.parallel.DistributedDataParallel, TTParallelBase):
    """``DistributedDataParallel`` that keeps the model's ``get_loss``/``get_predictions``."""

    def __init__(
        self,
        module: nn.Module,
        default_model_methods: Sequence[str] = _DEFAULT_METHODS,
        **kwargs: Any,
    ) -> None:
        nn.parallel.DistributedDataParallel.__init__(self, module, **kwargs)
        TTParallelBase.__init__(self, module, default_model_methods)
