"""The randomness probe of cached datasets: is ``__getitem__`` the same at every call?

Caching freezes what ``__getitem__`` returns; a random augmentation there would be served
as its first draw forever. :func:`probe_deterministic` calls it twice and compares (deep,
NaN-aware), and watches the global random generators; :func:`_attributes_kept` puts back
what the calls changed on the dataset (a file opened on first use).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from scramjet.accel._store import encode


def _same(a: Any, b: Any) -> bool:
    """Deep equality for the probe; NaN equals NaN at the same position (any nesting)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        if a.layout != b.layout or a.is_nested != b.is_nested or a.is_quantized != b.is_quantized:
            return False
        if a.is_nested:
            return _same(list(a.unbind()), list(b.unbind()))
        if a.layout != torch.strided:  # sparse COO / CSR / ...: compare their dense values
            return _same(a.to_dense(), b.to_dense())
        if a.is_quantized:
            return _same(a.int_repr(), b.int_repr()) and _same(a.dequantize(), b.dequantize())
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            return False
        if torch.equal(a, b):
            return True
        if a.is_complex():
            a, b = torch.view_as_real(a), torch.view_as_real(b)
        if not a.is_floating_point():
            return False
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    if isinstance(a, np.ndarray):
        nan_kinds = a.dtype.kind in "fc" and b.dtype.kind in "fc"
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=nan_kinds))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    # Python and NumPy float/complex scalars: NaN == NaN is False, but the value is the same.
    if isinstance(a, (float, complex, np.inexact)):
        return bool(a == b) or bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    if getattr(type(a), "__eq__", None) is not object.__eq__:
        try:
            return bool(a == b)
        except Exception:  # an == that gives no single truth value (a pandas Series)
            pass
    # == says nothing (identity, or no truth value): the same pickled bytes are the same value;
    # a value that cannot be pickled cannot be cached either, and is not called random.
    try:
        return encode(a) == encode(b)
    except Exception:
        return True


def _global_rng_states() -> tuple[Any, ...]:
    return (torch.get_rng_state(), np.random.get_state(), random.getstate())


def probe_deterministic(getitem: Callable[[int], Any], index: int = 0) -> bool:
    """Call ``getitem(index)`` twice and say whether it is deterministic.

    It is not when the two results differ, or when each call draws from one of the global
    random generators (torch, NumPy, ``random``): a random flip with probability 0.5 gives
    two equal results half the time, but moves the generator on every call. A ``getitem``
    that seeds a generator from the index before drawing leaves it in the same state after
    both calls, and counts as deterministic.

    Equality is deep (tensors, NumPy arrays, scalars, nested lists/tuples/dicts) and
    NaN-aware: a NaN equals a NaN at the same position, so data with missing values does not
    look random.

    The global RNG states (torch, NumPy, random) are restored afterwards, so the probe does
    not shift the user's random streams.
    """
    states = _global_rng_states()
    try:
        first = getitem(index)
        after_first = _global_rng_states()
        second = getitem(index)
        after_second = _global_rng_states()
        if not _same(first, second):
            return False
        return not any(
            not _same(before, mid) and not _same(mid, after)
            for before, mid, after in zip(states, after_first, after_second)
        )
    finally:
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])
        random.setstate(states[2])


_MISSING = object()


@contextlib.contextmanager
def _attributes_kept(objects: list[Any]) -> Iterator[None]:
    """Put back the attributes ``objects`` had before the block: a ``__getitem__`` that
    opens its file on first use (``self.file = h5py.File(...)``, a ``np.memmap``) leaves
    it unopened, so forked DataLoader workers and preloaders open their own."""
    saved = [(vars(o), dict(vars(o))) for o in objects if hasattr(o, "__dict__")]
    try:
        yield
    finally:
        for now, before in saved:
            for key in [k for k in now if k not in before]:
                del now[key]
            for key, value in before.items():
                if now.get(key, _MISSING) is not value:
                    now[key] = value


def _nested_datasets(dataset: Any, depth: int = 8) -> list[Any]:
    """``dataset`` and the datasets it wraps: ``.dataset`` (``Subset``, wrappers) and
    ``.datasets`` (``ConcatDataset``), a few levels down."""
    found: list[Any] = []
    todo = [(dataset, 0)]
    while todo:
        item, level = todo.pop()
        if any(item is seen for seen in found) or not hasattr(item, "__dict__"):
            continue
        found.append(item)
        if level < depth:
            many = vars(item).get("datasets")
            inner = [vars(item).get("dataset"), *(many if isinstance(many, list | tuple) else [])]
            todo += [(d, level + 1) for d in inner if d is not None]
    return found
