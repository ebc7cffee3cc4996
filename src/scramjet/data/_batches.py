"""What a batch of a pack is made of: the buffer a batch is read into, and the collation
of transformed samples, column by column, the way batches without a transform come."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from scramjet.data._args import check_array_index
from scramjet.data._ring import share_memory
from scramjet.data.format import ColumnSpec


def batch_buffer(
    shape: tuple[int, ...], dtype: np.dtype, shared: bool
) -> tuple[torch.Tensor, np.ndarray]:
    """An empty batch as a tensor and a numpy view of it.

    Inside a DataLoader worker, image batches are allocated in shared memory: the worker
    decodes straight into the memory the main process receives, with no extra copy.
    """
    if shared and get_worker_info() is not None:
        tensor = share_memory(torch.empty(shape, dtype=torch.uint8))
        return tensor, tensor.numpy()
    out = np.empty(shape, dtype)
    return torch.from_numpy(out), out


def collate_column(values: list[Any], col: ColumnSpec | None) -> Any:
    """One column of transformed samples, batched as without a transform: a list for a
    variable-length or ``str`` column and for values of unequal shapes, else stacked."""
    if isinstance(values[0], str) or (col is not None and col.dtype == "str"):
        return values
    variable = col is not None and col.kind == "value" and col.variable
    shapes = {tuple(v.shape) for v in values if isinstance(v, torch.Tensor | np.ndarray)}
    if variable or len(shapes) > 1:
        return [torch.as_tensor(v) for v in values]
    return default_collate(values)


def collate_samples(samples: list[Any], columns: Sequence[ColumnSpec]) -> dict[str, Any]:
    """Transformed samples (dicts) as one batch: each of their keys collated by
    :func:`collate_column`, with the pack's spec of the column of that name, if any."""
    specs = {c.name: c for c in columns}
    return {
        name: collate_column([s[name] for s in samples], specs.get(name)) for name in samples[0]
    }


def batch_indices(index: Any, n: int) -> list[Any]:
    """The samples a batch index names, in order: a slice of a pack of ``n`` samples, or a
    1-D sequence, array or tensor of indices (their values are checked by the reader).

    Raises:
        TypeError: an index of two or more dimensions (a batch is one row of samples), a
            boolean mask or float tensor or array, a dict or a set, or one that is not a
            slice, a sequence, an array or a tensor.
    """
    if isinstance(index, slice):
        return list(range(*index.indices(n)))
    if isinstance(index, torch.Tensor | np.ndarray):
        check_array_index(index)
        shape: tuple[int, ...] = tuple(index.shape)
        values = index.tolist()
    elif isinstance(index, Mapping | AbstractSet):
        fix = "list(index)" if isinstance(index, Mapping) else "sorted(index)"
        raise TypeError(
            f"a batch index must be an ordered sequence of ints; received a "
            f"{type(index).__name__} {index!r}, whose order (and, for a dict, whether its "
            f"keys or values are meant) is not a batch. Pass a list, e.g. ds[{fix}]."
        )
    elif isinstance(index, Iterable) and not isinstance(index, str | bytes):
        values = list(index)
        nested = {
            np.shape(v) for v in values if isinstance(v, Sequence | np.ndarray | torch.Tensor)
        }
        inner = next(iter(nested)) if len(nested) == 1 else (-1,)  # -1: rows of unequal length
        shape = (len(values), *inner) if nested else ()
    else:
        raise TypeError(
            f"index must be an int, a 0-d integer tensor or array, a slice or a sequence of "
            f"ints; received {type(index).__name__} {index!r}"
        )
    if len(shape) > 1:
        raise TypeError(
            f"a batch index must be 1-D (one index per sample); received a "
            f"{len(shape)}-D {type(index).__name__} of shape {shape}. Flatten it "
            f"(np.ravel(index)), or read each row of it as its own batch."
        )
    return values
