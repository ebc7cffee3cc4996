"""meProp sparse backward for ``nn.Linear`` layers, opt-in.

For a Linear layer with output gradient ``G`` (N x out, N = every leading dimension
flattened, so transformer blocks with (B, T, C) inputs work), the backward keeps the ``k``
output units with the largest total |G| over the batch (``k = ceil(ratio * out_features)``)
and computes both backward matmuls densely on the gathered ``k`` columns:

    grad_x        = G[:, idx] @ W[idx, :]          (N x k @ k x in)
    grad_W[idx]   = G[:, idx].T @ X                (k x N @ N x in), other rows zero
    grad_b        = G.sum(0)                       (dense: cheap)

This is the "unified top-k" form of meProp (Sun et al., 2017): one index set per batch, so
the work is two smaller dense GEMMs instead of a sparse COO product. Layers with fewer than
``min_features`` outputs keep the dense backward, and the output head (the last Linear in
module order) is never sparsified, so every parameter keeps receiving gradient. Under
autocast the backward runs in the gradient's dtype and returns gradients in each input's
dtype. It changes the optimisation trajectory: measure accuracy before adopting it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class SparseBackpropConfig:
    """Which Linear layers get a top-k backward, and how sparse.

    Attributes:
        ratio: fraction of output units kept per batch (0 < ratio <= 1).
        min_features: layers with fewer outputs keep the dense backward.
        exclude_head: leave the last Linear layer in module order dense.
        exclude: qualified names of further Linear layers to leave dense.
    """

    ratio: float = 0.1
    min_features: int = 64
    exclude_head: bool = True
    exclude: Sequence[str] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not 0.0 < self.ratio <= 1.0:
            raise ValueError(f"ratio must be in (0, 1], got {self.ratio}; e.g. ratio=0.1")
        if self.min_features < 1:
            raise ValueError(f"min_features must be >= 1, got {self.min_features}")

    def k_for(self, out_features: int) -> int | None:
        """Units kept for a layer, or None when the layer stays dense."""
        if out_features < self.min_features:
            return None
        k = max(1, math.ceil(self.ratio * out_features))
        return None if k >= out_features else k


class _TopKLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, k: int
    ) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.k = k
        ctx.bias_dtype = None if bias is None else bias.dtype
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        x, weight = ctx.saved_tensors
        g = grad_out.reshape(-1, grad_out.shape[-1])
        idx = g.abs().sum(0).topk(ctx.k, sorted=False).indices
        gk = g.index_select(1, idx)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            w_k = weight.index_select(0, idx).to(gk.dtype)
            grad_x = (gk @ w_k).reshape(x.shape).to(x.dtype)
        if ctx.needs_input_grad[1]:
            x2 = x.reshape(-1, x.shape[-1]).to(gk.dtype)
            grad_w = torch.zeros_like(weight)
            grad_w.index_copy_(0, idx, (gk.t() @ x2).to(weight.dtype))
        if ctx.needs_input_grad[2]:
            grad_b = g.sum(0).to(ctx.bias_dtype)
        return grad_x, grad_w, grad_b, None


def sparse_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, k: int
) -> torch.Tensor:
    """``F.linear`` whose backward keeps the top-``k`` output units (see module docstring)."""
    if not torch.is_grad_enabled() or not (x.requires_grad or weight.requires_grad):
        return F.linear(x, weight, bias)
    return _TopKLinearFn.apply(x, weight, bias, k)  # type: ignore[no-any-return]


def _patched_forward(layer: nn.Linear, k: int, x: torch.Tensor) -> torch.Tensor:
    return sparse_linear(x, layer.weight, layer.bias, k)


def apply_sparse_backprop(
    model: nn.Module, config: SparseBackpropConfig | None = None
) -> dict[str, int]:
    """Give eligible ``nn.Linear`` layers of ``model`` a top-k backward, in place.

    Only the layer instances change (an instance-level ``forward``); classes, parameters and
    ``state_dict`` keys stay as they were, and the model still pickles.

    Args:
        model: the model to patch.
        config: sparsity settings (default :class:`SparseBackpropConfig`).

    Returns:
        ``{layer name: k}`` for every layer patched.
    """
    cfg = config or SparseBackpropConfig()
    linears = [(n, m) for n, m in model.named_modules() if type(m) is nn.Linear]
    excluded = set(cfg.exclude)
    if cfg.exclude_head and linears:
        excluded.add(linears[-1][0])
    patched: dict[str, int] = {}
    for name, layer in linears:
        k = cfg.k_for(layer.out_features)
        if name in excluded or k is None:
            continue
        layer.forward = functools.partial(_patched_forward, layer, k)  # type: ignore[method-assign]
        patched[name] = k
    return patched


def remove_sparse_backprop(model: nn.Module) -> list[str]:
    """Undo :func:`apply_sparse_backprop`; return the names of the layers restored."""
    restored = []
    for name, layer in model.named_modules():
        fwd = layer.__dict__.get("forward")
        if isinstance(fwd, functools.partial) and fwd.func is _patched_forward:
            del layer.__dict__["forward"]
            restored.append(name)
    return restored
