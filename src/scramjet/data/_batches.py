"""What a batch of a pack is made of: the buffer a batch is read into, and the collation
of transformed samples, column by column, the way batches without a transform come."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

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
