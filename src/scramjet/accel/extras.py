"""Opt-in speed switches, each a pure function that can be tested and measured on its own.

- :func:`to_channels_last` / :func:`inputs_to_channels_last`: channels-last memory format.
- :func:`set_tf32` / :func:`tf32`: TF32 matmuls and convolutions on CUDA (Ampere+).
- :func:`fast_optimizer_kwargs` / :func:`fast_optimizer`: fused (CUDA, CPU) or foreach optimizers.
- :func:`resolve_autocast` / :func:`autocast`: bf16/fp16 autocast.
- CUDA graphs: ``accelerate_model(..., backends=["COMPILE"], cuda_graphs=True)`` selects
  ``torch.compile(mode="reduce-overhead")``; see :func:`cuda_graphs_supported`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch
from torch import nn
from torch.utils._pytree import tree_map

_AUTOCAST_NAMES = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
}


def to_channels_last(module: nn.Module) -> nn.Module:
    """Convert the module's 4-D parameters and buffers to channels-last, in place.

    Args:
        module: any module; only 4-D tensors (convolution weights) change layout.

    Returns:
        The same module, for chaining.
    """
    # Module.to accepts memory_format, but torch's overloads for it leave it out.
    to = cast("Callable[..., nn.Module]", module.to)
    return to(memory_format=torch.channels_last)


def inputs_to_channels_last(tree: Any) -> Any:
    """Return ``tree`` with every 4-D floating tensor in channels-last layout."""

    def convert(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.dim() == 4 and t.is_floating_point():
            return t.contiguous(memory_format=torch.channels_last)
        return t

    return tree_map(convert, tree)


def set_tf32(enabled: bool = True) -> dict[str, Any]:
    """Switch TF32 for CUDA matmuls and cuDNN convolutions; return the previous settings.

    TF32 keeps fp32 range with a 10-bit mantissa in tensor-core matmuls (about 1e-3
    relative error). It has no effect on CPU.

    Args:
        enabled: ``True`` to allow TF32, ``False`` to forbid it.

    Returns:
        The previous settings, to pass to :func:`restore_tf32`.
    """
    previous = {
        "matmul": torch.backends.cuda.matmul.allow_tf32,
        "cudnn": torch.backends.cudnn.allow_tf32,
    }
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    return previous


def restore_tf32(previous: dict[str, Any]) -> None:
    """Restore settings returned by :func:`set_tf32`."""
    torch.backends.cuda.matmul.allow_tf32 = previous["matmul"]
    torch.backends.cudnn.allow_tf32 = previous["cudnn"]


@contextlib.contextmanager
def tf32(enabled: bool = True) -> Iterator[None]:
    """Context manager form of :func:`set_tf32`."""
    previous = set_tf32(enabled)
    try:
        yield
    finally:
        restore_tf32(previous)


def fast_optimizer_kwargs(optimizer_cls: type, device: torch.device | str) -> dict[str, bool]:
    """Keyword arguments that select the fastest implementation ``optimizer_cls`` offers.

    ``fused=True`` when the class accepts it and torch has fused kernels for the device
    (CUDA, and CPU since torch 2.4: the AdamW step measured 5.3x faster with 256 small
    tensors and 3-8x with 8.4 M parameters in large tensors on a 2-core CPU, see
    ``benchmarks/accel_extras.py``), else ``foreach=True`` when accepted (RMSprop: 1.6x),
    else nothing.

    Args:
        optimizer_cls: e.g. ``torch.optim.AdamW``.
        device: where the parameters live.

    Returns:
        A dict to splat into the optimizer's constructor.
    """
    params = inspect.signature(optimizer_cls).parameters
    if "fused" in params and torch.device(device).type in _fused_devices():
        return {"fused": True}
    if "foreach" in params:
        return {"foreach": True}
    return {}


def _fused_devices() -> list[str]:
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:  # older torch: fused kernels were CUDA-only
        return ["cuda"]
    return list(_get_fused_kernels_supported_devices())


def fast_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """Rebuild ``optimizer`` with :func:`fast_optimizer_kwargs`, keeping groups and state.

    Fused kernels take real floating-point parameters with dense gradients only. With a
    complex parameter the optimizer is built with ``foreach=True`` instead; a group whose
    parameter gets a sparse gradient (``nn.Embedding(sparse=True)`` with ``SGD`` or
    ``Adagrad``) is switched to the default kernels at the first step, where that is seen.

    Args:
        optimizer: an optimizer from ``torch.optim``.

    Returns:
        A new optimizer of the same class over the same parameters and state (an LR
        scheduler must be created on it, not on the one passed in). The hooks registered
        on ``optimizer`` (step, ``state_dict`` and ``load_state_dict`` pre/post hooks) run
        on it in the same order, and their handles still remove them. Its ``defaults``
        are the ones ``optimizer`` was built with (a group added later gets them), with the
        kernels chosen here.

    Raises:
        RuntimeError: a sparse gradient met a fused group under a ``GradScaler`` (whose
            scaling a fused step undoes itself): build that optimizer without
            ``fast_optimizer``.
    """
    params = [p for g in optimizer.param_groups for p in g["params"]]
    # No parameters yet (every group empty, e.g. all layers frozen): nothing says which
    # device's kernels fit, so the groups keep the default ones.
    extra = fast_optimizer_kwargs(type(optimizer), params[0].device) if params else {}
    if extra.get("fused") and not all(p.is_floating_point() for p in params):
        # Complex parameters: fused kernels refuse them at construction.
        accepts_foreach = "foreach" in inspect.signature(type(optimizer)).parameters
        extra = {"foreach": True} if accepts_foreach else {}
    groups = [dict(g) for g in optimizer.param_groups]
    for group in groups:
        group.update(extra)
        for key in ("fused", "foreach"):
            if key not in extra:
                group.pop(key, None)
    new = _rebuild(optimizer, groups, extra)
    # Before the state moves over: old.state_dict() runs the user's state_dict hooks, so
    # new.load_state_dict() must run the matching load hooks (a rename and its inverse).
    _share_hooks(optimizer, new)
    # Built from the groups alone, ``new.defaults`` holds the class's defaults; a group added
    # later (add_param_group) must get the settings the user built the optimizer with.
    kernels: dict[str, Any] = {
        k: new.defaults[k] for k in ("fused", "foreach") if k in new.defaults
    }
    new.defaults = {**optimizer.defaults, **kernels}
    new.load_state_dict(optimizer.state_dict())
    for group in new.param_groups:
        group.update(extra)
    if extra.get("fused"):
        _unfuse_groups_with_sparse_grads(new)
    return new


def _rebuild(
    optimizer: torch.optim.Optimizer, groups: list[dict[str, Any]], extra: dict[str, bool]
) -> torch.optim.Optimizer:
    """``type(optimizer)(groups, **extra)``, with the attributes a subclass's own
    ``__init__`` set (``self.warmup = warmup``) carried over from ``optimizer``."""
    # The concrete class takes fused/foreach keywords that the base Optimizer does not.
    optimizer_cls: Callable[..., torch.optim.Optimizer] = type(optimizer)
    name = type(optimizer).__name__
    try:
        new = optimizer_cls(groups, **extra)
    except TypeError as exc:
        shown = "".join(f", {k}=True" for k in extra)
        raise TypeError(
            f"fast_optimizer rebuilds the optimizer as {name}(param_groups{shown}), which "
            f"failed: {exc}. {name}'s constructor takes other arguments; build it yourself "
            f"with the fast kernels instead: {name}(params, ..., "
            f"**fast_optimizer_kwargs({name}, device))"
        ) from exc
    if not type(optimizer).__init__.__module__.startswith("torch."):
        internal = _optimizer_internals()
        for key, value in vars(optimizer).items():
            if key not in internal:
                setattr(new, key, value)
    return new


#: The per-optimizer hook tables of ``torch.optim.Optimizer`` (``register_*_hook``).
_HOOK_TABLES = (
    "_optimizer_step_pre_hooks",
    "_optimizer_step_post_hooks",
    "_optimizer_state_dict_pre_hooks",
    "_optimizer_state_dict_post_hooks",
    "_optimizer_load_state_dict_pre_hooks",
    "_optimizer_load_state_dict_post_hooks",
)


def _share_hooks(old: torch.optim.Optimizer, new: torch.optim.Optimizer) -> None:
    """Give ``new`` the hook tables of ``old`` itself (not copies): each hook keeps its
    place, and a handle returned by ``old.register_*_hook`` removes it from ``new``."""
    for table in _HOOK_TABLES:
        hooks = getattr(old, table, None)
        if hooks is not None:
            setattr(new, table, hooks)


@functools.cache
def _optimizer_internals() -> frozenset[str]:
    """What torch.optim's constructors set: built anew, never copied from the old one."""
    plain = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    return frozenset(vars(plain)) | {"_step_supports_amp_scaling"}


def _unfuse_groups_with_sparse_grads(optimizer: torch.optim.Optimizer) -> None:
    """At the first step with gradients, give groups holding a sparse one the default kernels."""
    handles: list[Any] = []

    def check(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        seen = False
        for group in opt.param_groups:
            grads = [p.grad for p in group["params"] if p.grad is not None]
            seen = seen or bool(grads)
            if not group.get("fused") or not any(g.is_sparse for g in grads):
                continue
            if getattr(opt, "grad_scale", None) is not None:
                raise RuntimeError(
                    f"fast_optimizer chose fused {type(opt).__name__} kernels, but a parameter "
                    "got a sparse gradient (nn.Embedding(sparse=True)?), which they do not "
                    "take, and a GradScaler is scaling this step; build this optimizer "
                    "without fast_optimizer, or use a dense embedding"
                )
            group["fused"] = False
        if seen:
            handles[0].remove()

    handles.append(optimizer.register_step_pre_hook(check))


def resolve_autocast(value: str | torch.dtype | None) -> torch.dtype | None:
    """Turn ``"bf16"``/``"fp16"``/a dtype/``None`` into an autocast dtype (or None).

    Raises:
        ValueError: an unknown name.
    """
    if value is None or isinstance(value, torch.dtype):
        return value
    try:
        return _AUTOCAST_NAMES[str(value).lower()]
    except KeyError:
        raise ValueError(
            f"autocast={value!r} is not understood; use 'bf16', 'fp16', a torch dtype or None"
        ) from None


def autocast(device_type: str, dtype: str | torch.dtype = "bf16") -> torch.autocast:
    """An autocast context for ``device_type`` with a readable dtype name."""
    resolved = resolve_autocast(dtype)
    return torch.autocast(device_type, dtype=resolved)


def cuda_graphs_supported() -> bool:
    """True when CUDA graphs can be captured here (a CUDA device is present)."""
    return torch.cuda.is_available()
