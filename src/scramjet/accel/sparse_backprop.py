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
``min_features`` outputs keep the dense backward, and so do the model's output heads, so
every parameter keeps receiving gradient. Under autocast the backward runs in the
gradient's dtype and returns gradients in each input's dtype. It changes the optimisation
trajectory: measure accuracy before adopting it.

Output heads are found from what the model computes, not from the order in which layers
are registered. Until then every ``nn.Linear`` records the autograd node of its output; when
the first backward pass reaches a patched layer (before any top-k gradient is computed),
the recorded graph is walked and every Linear whose output reaches no other ``nn.Linear`` is
a head: the layer producing the logits whether or not a softmax, activation or loss term
follows it, every head of a multi-head model, and a layer feeding an auxiliary output.
Heads get the plain dense ``forward`` back; the first step already uses the final choice.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.hooks import RemovableHandle

_FINDER_ATTR = "_scramjet_sparse_heads"


@dataclass(frozen=True)
class SparseBackpropConfig:
    """Which Linear layers get a top-k backward, and how sparse.

    Attributes:
        ratio: fraction of output units kept per batch (0 < ratio <= 1).
        min_features: layers with fewer outputs keep the dense backward.
        exclude_head: keep the model's output head(s) dense. They are found on the first
            backward pass: every ``nn.Linear`` whose output feeds no other ``nn.Linear``
            (see the module docstring), wherever it is registered.
        exclude: qualified names (as in ``named_modules()``) of Linear layers to keep dense
            as well; with ``exclude_head=False`` these are the only dense layers besides the
            small ones, e.g. ``exclude=("classifier",)`` to name the head yourself.
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
        if isinstance(self.exclude, str):
            raise TypeError(
                f"exclude must be a sequence of layer names, got the string {self.exclude!r}; "
                f"write exclude=({self.exclude!r},)"
            )

    def k_for(self, out_features: int) -> int | None:
        """Units kept for a layer, or None when the layer stays dense."""
        if out_features < self.min_features:
            return None
        k = max(1, math.ceil(self.ratio * out_features))
        return None if k >= out_features else k


class _TopKLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        k: int,
        dense_if: Callable[[], bool] | None,
    ) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.k = k
        ctx.dense_if = dense_if
        ctx.bias_dtype = None if bias is None else bias.dtype
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        x, weight = ctx.saved_tensors
        g = grad_out.reshape(-1, grad_out.shape[-1])
        # Called before the first top-k: decides whether this layer is an output head.
        dense = ctx.dense_if is not None and ctx.dense_if()
        idx = None if dense else g.abs().sum(0).topk(ctx.k, sorted=False).indices
        gk = g if idx is None else g.index_select(1, idx)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            w_k = weight if idx is None else weight.index_select(0, idx)
            grad_x = (gk @ w_k.to(gk.dtype)).reshape(x.shape).to(x.dtype)
        if ctx.needs_input_grad[1]:
            x2 = x.reshape(-1, x.shape[-1]).to(gk.dtype)
            rows = (gk.t() @ x2).to(weight.dtype)
            if idx is None:
                grad_w = rows
            else:
                grad_w = torch.zeros_like(weight)
                grad_w.index_copy_(0, idx, rows)
        if ctx.needs_input_grad[2]:
            grad_b = g.sum(0).to(ctx.bias_dtype)
        return grad_x, grad_w, grad_b, None, None


def sparse_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    k: int,
    dense_if: Callable[[], bool] | None = None,
) -> torch.Tensor:
    """``F.linear`` whose backward keeps the top-``k`` output units (see module docstring).

    ``dense_if``, when given, is called once in the backward; if it returns True that
    backward is dense instead.
    """
    if not torch.is_grad_enabled() or not (x.requires_grad or weight.requires_grad):
        return F.linear(x, weight, bias)
    # Function.apply is unannotated in torch; it returns what forward returns.
    apply = cast("Callable[..., torch.Tensor]", _TopKLinearFn.apply)
    return apply(x, weight, bias, k, dense_if)


def in_function_transform() -> bool:
    """Whether a ``torch.func`` transform (``grad``, ``vmap``, ``jacrev``, ...) is running."""
    stack = getattr(torch._C._functorch, "peek_interpreter_stack", None)
    return stack is not None and stack() is not None


def _patched_forward(
    layer: nn.Linear, k: int, x: torch.Tensor, dense_if: Callable[[], bool] | None = None
) -> torch.Tensor:
    if torch.compiler.is_compiling():
        if dense_if is not None:
            # Heads are not known yet and a traced graph cannot ask: trace the dense forward.
            # scramjet's COMPILE backend runs one eager step first, so it never gets here.
            return F.linear(x, layer.weight, layer.bias)
        # (functorch's interpreter stack reads as a transform while Dynamo traces: the
        # top-k Function is traced, forward and backward, as the eager step ran it)
        return sparse_linear(x, layer.weight, layer.bias, k)
    if in_function_transform():
        # Per-sample gradients, Jacobians: the exact dense backward (the top-k Function has
        # no functorch rule, and a per-sample top-k is not meProp's batch-wide choice).
        return F.linear(x, layer.weight, layer.bias)
    return sparse_linear(x, layer.weight, layer.bias, k, dense_if)


class _HeadFinder:
    """Finds the output heads on the first backward pass and keeps them dense.

    Forward hooks on every ``nn.Linear`` record the autograd node of each output; a forward
    pre-hook on the model starts a new record per grad-enabled call, so at most one forward
    pass is held. The first patched layer to run its backward calls :meth:`is_dense`, which
    walks the recorded graph once: a Linear whose output reaches no other recorded Linear is
    a head. Heads are then restored to the dense ``forward``, the other candidates keep the
    top-k one, and the hooks are removed.
    """

    def __init__(
        self,
        model: nn.Module,
        candidates: dict[str, tuple[nn.Linear, int]],
        patched: dict[str, int],
    ) -> None:
        self.candidates = candidates
        self.patched = patched
        self.heads: frozenset[str] | None = None
        self._records: list[tuple[str, Any]] = []
        self._lock = threading.RLock()
        self._handles: list[RemovableHandle] = [model.register_forward_pre_hook(self._new_call)]
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear):
                hook = functools.partial(self._record, name)
                self._handles.append(module.register_forward_hook(hook))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        state["_records"] = []  # autograd nodes do not pickle; the copy records its own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def _new_call(self, module: nn.Module, args: Any) -> None:
        if self.heads is None and torch.is_grad_enabled() and not torch.compiler.is_compiling():
            with self._lock:
                self._records = []

    def _record(self, name: str, module: nn.Module, args: Any, output: Any) -> None:
        if self.heads is not None or torch.compiler.is_compiling():
            return
        node = getattr(output, "grad_fn", None)
        if node is not None:
            with self._lock:
                self._records.append((name, node))

    def is_dense(self, name: str) -> bool:
        """Whether layer ``name`` is a head (deciding now if not yet decided).

        With nothing recorded (the forward ran with hooks bypassed), the layer is treated
        as a head for this backward and the decision waits for the next forward pass.
        """
        if self.heads is None:
            self._decide()
        return self.heads is None or name in self.heads

    def _decide(self) -> None:
        with self._lock:
            if self.heads is not None or not self._records:
                return
            records, self._records = self._records, []
            linear_nodes = {id(node) for _, node in records}
            fed: set[int] = set()  # Linear outputs that reach another Linear
            seen: dict[int, Any] = {}  # holds the nodes, so their ids stay unique
            stack = [fn for _, node in records for fn, _ in node.next_functions]
            while stack:
                fn = stack.pop()
                if fn is None or id(fn) in seen:
                    continue
                seen[id(fn)] = fn
                if id(fn) in linear_nodes:
                    fed.add(id(fn))  # its own inputs are walked from its own record
                    continue
                stack.extend(nxt for nxt, _ in fn.next_functions)
            self.heads = frozenset(name for name, node in records if id(node) not in fed)
            self.close()
            for name, (layer, k) in self.candidates.items():
                if name in self.heads:
                    layer.__dict__.pop("forward", None)
                    self.patched.pop(name, None)
                else:
                    layer.forward = functools.partial(_patched_forward, layer, k)  # type: ignore[method-assign]

    def close(self) -> None:
        """Remove the recording hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def detach(self) -> None:
        """Stop for good (the patch is removed): pending backwards then stay dense."""
        with self._lock:
            self.close()
            self._records = []
            self.candidates = {}


def apply_sparse_backprop(
    model: nn.Module, config: SparseBackpropConfig | None = None
) -> dict[str, int]:
    """Give eligible ``nn.Linear`` layers of ``model`` a top-k backward, in place.

    Only the layer instances change (an instance-level ``forward``); classes, parameters and
    ``state_dict`` keys stay as they were, and the model still pickles. Applying again
    replaces an earlier patch.

    With ``exclude_head=True`` (the default) the output heads are chosen on the first
    backward pass through a patched layer, before any top-k gradient is computed (see the
    module docstring): until then the returned dict also lists layers that may turn out to
    be heads; they are removed from it when they are restored to the dense ``forward``.

    Args:
        model: the model to patch.
        config: sparsity settings (default :class:`SparseBackpropConfig`).

    Returns:
        ``{layer name: k}`` for every layer patched; the same dict is updated once the
        heads are known.

    Raises:
        ValueError: a name in ``config.exclude`` is not a Linear layer of ``model``.
    """
    cfg = config or SparseBackpropConfig()
    remove_sparse_backprop(model)
    linears = [(n, m) for n, m in model.named_modules() if type(m) is nn.Linear]
    excluded = set(cfg.exclude)
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    unknown = excluded.difference(names)
    if unknown:
        raise ValueError(
            f"exclude names {sorted(unknown)} are not Linear layers of {type(model).__name__}; "
            f"its Linear layers are {names}"
        )
    candidates = {
        name: (layer, k)
        for name, layer in linears
        if name not in excluded and (k := cfg.k_for(layer.out_features)) is not None
    }
    patched = {name: k for name, (_, k) in candidates.items()}
    finder = None
    if cfg.exclude_head and candidates:
        finder = _HeadFinder(model, candidates, patched)
        model.__dict__[_FINDER_ATTR] = finder
    for name, (layer, k) in candidates.items():
        dense_if = None if finder is None else functools.partial(finder.is_dense, name)
        layer.forward = functools.partial(_patched_forward, layer, k, dense_if=dense_if)  # type: ignore[method-assign]
    return patched


def remove_sparse_backprop(model: nn.Module) -> list[str]:
    """Undo :func:`apply_sparse_backprop`; return the names of the layers restored."""
    for module in model.modules():  # also a patch applied to a submodule before
        finder = module.__dict__.pop(_FINDER_ATTR, None)
        if isinstance(finder, _HeadFinder):
            finder.detach()
    restored = []
    for name, layer in model.named_modules():
        fwd = layer.__dict__.get("forward")
        if isinstance(fwd, functools.partial) and fwd.func is _patched_forward:
            del layer.__dict__["forward"]
            restored.append(name)
    return restored
