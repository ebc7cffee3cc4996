"""How the first-step check compares a backend's outputs with eager's.

The leaves of an output (dataclass instances opened field by field), the exact comparison of
integer and bool outputs, and the tolerance and rounding bounds for floating-point ones.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map


def _is_dataclass_instance(x: Any) -> bool:
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def output_leaves(out: Any) -> list[Any]:
    """The leaves of ``out``, with dataclass instances opened field by field.

    ``tree_flatten`` opens tuples, lists, dicts, named tuples and registered classes (Hugging
    Face ``ModelOutput``), but takes a plain ``@dataclass`` for one opaque leaf: its tensors
    would escape the first-step check.
    """
    leaves, _ = tree_flatten(out)
    found: list[Any] = []
    for leaf in leaves:
        if _is_dataclass_instance(leaf):
            fields = [getattr(leaf, f.name) for f in dataclasses.fields(leaf)]
            found += output_leaves(fields)
        else:
            found.append(leaf)
    return found


def map_output_tensors(fn: Callable[[Any], Any], out: Any) -> Any:
    """``tree_map(fn, out)`` that also maps the fields of dataclass instances (on a copy)."""

    def leaf(x: Any) -> Any:
        if not _is_dataclass_instance(x):
            return fn(x)
        new = copy.copy(x)
        for f in dataclasses.fields(x):
            # object.__setattr__: frozen dataclasses too.
            object.__setattr__(new, f.name, map_output_tensors(fn, getattr(x, f.name)))
        return new

    return tree_map(leaf, out)


def _float_leaves(out: Any) -> list[torch.Tensor]:
    """The floating-point tensors of ``out``, complex ones as their (real, imaginary) pairs:
    a spectrum (``torch.fft``) is checked, and gets gradients, like any float output."""
    found = []
    for t in output_leaves(out):
        if isinstance(t, torch.Tensor) and t.is_complex():
            found.append(torch.view_as_real(t.resolve_conj()))
        elif isinstance(t, torch.Tensor) and t.is_floating_point():
            found.append(t)
    return found


def _exact_leaves(out: Any) -> list[torch.Tensor]:
    """The integer and bool tensors of ``out`` (class indices, masks): compared exactly."""
    return [
        t
        for t in output_leaves(out)
        if isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex())
    ]


def _exact_problem(out: Any, ref: Any, full: Any = None) -> str | None:
    """How the integer and bool tensors of ``out`` differ from eager's ``ref``, else None.

    Entries must be equal, dtypes and shapes too. Under autocast ``full`` is the full
    precision run: an entry equal to its entry there is right (a tie that low precision
    made, an argmax that rounding flipped)."""
    got, want = _exact_leaves(out), _exact_leaves(ref)
    if len(got) != len(want):
        return f"returned {len(got)} integer or bool tensors, eager {len(want)}"
    fulls: list[torch.Tensor | None] = list(_exact_leaves(full)) if full is not None else []
    if len(fulls) != len(want):
        fulls = [None] * len(want)
    for i, (g, w, f) in enumerate(zip(got, want, fulls)):
        if g.dtype != w.dtype or g.shape != w.shape:
            return (
                f"{g.dtype} output {i} has dtype {g.dtype} and shape {tuple(g.shape)}, eager's "
                f"dtype {w.dtype} and shape {tuple(w.shape)}"
            )
        wrong = g.detach() != w.detach()
        against = "eager"
        if f is not None and f.dtype == g.dtype and f.shape == g.shape:
            wrong &= g.detach() != f.detach()
            against = "both eager and full precision"
        count = int(wrong.sum())
        if count:
            return (
                f"{g.dtype} output {i} differs from {against} in {count} of {g.numel()} "
                "entries (integer and bool outputs must be equal)"
            )
    return None


def _finite_abs_max(t: torch.Tensor) -> float:
    """The largest finite ``|t|`` entry (0.0 when there is none)."""
    finite = t.detach()[t.detach().isfinite()]
    return float(finite.abs().max()) if finite.numel() else 0.0


def _split_non_finite(c: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``c`` and ``e`` (as float64) at the entries where ``e`` is finite, or None when ``c``
    does not have eager's NaN and ±inf (masked logits, a fully padded row) exactly."""
    c64, e64 = c.detach().double(), e.detach().double()
    finite = e64.isfinite()
    special_c, special_e = c64[~finite], e64[~finite]
    if not bool(((special_c == special_e) | (special_c.isnan() & special_e.isnan())).all()):
        return None
    return c64[finite], e64[finite]


def _mismatch(
    c: torch.Tensor, e: torch.Tensor, rtol: float, atol: float, scale: float = 0.0
) -> float | None:
    """Return the error when ``c`` is outside tolerance of ``e``, else None. NaN and ±inf
    must sit where eager has them; the finite entries are held to the bound."""
    if c.shape != e.shape:
        return float("inf")
    split = _split_non_finite(c, e)
    if split is None:
        return float("nan")
    c64, e64 = split
    bound = atol + rtol * max(_finite_abs_max(e64), scale)
    err = float((c64 - e64).abs().max()) if e64.numel() else 0.0
    if err != err or err > bound:  # NaN where eager is finite counts as a mismatch
        return err
    return None


def _rounding_excess(b: torch.Tensor, e: torch.Tensor, f: torch.Tensor, atol: float) -> float:
    """How far the backend's L2 error against full precision ``f`` exceeds what rounding
    explains: ``||b - f|| - (2 ||e - f|| + 0.01 ||f|| + atol sqrt(n))``; > 0 fails.
    NaN and ±inf of ``f`` must be ``b``'s too; the rest is measured where ``f`` is finite."""
    if not b.shape == e.shape == f.shape:
        return float("inf")
    split = _split_non_finite(b, f)
    if split is None:
        return float("inf")
    b64, f64 = split
    e64 = e.detach().double()[f.detach().isfinite()]
    norm = torch.linalg.vector_norm
    allowed = 2 * float(norm(e64 - f64)) + 0.01 * float(norm(f64)) + atol * f64.numel() ** 0.5
    err = float(norm(b64 - f64))
    return err - allowed if err == err else float("inf")  # NaN fails
