"""Checks of what :class:`~scramjet.data.PackedDataset` is given: indices and loader settings.

Each check says what it received, what it expects and how to fix the call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def scalar_index(index: Any) -> Any:
    """``index`` as an ``int`` when it is one sample's index, else unchanged.

    Python and numpy integers, and 0-d integer tensors and arrays (``ds[torch.tensor(3)]``,
    ``ds[np.int64(3)]``), name one sample. A 0-d float or bool tensor is refused: it is
    probably a mistake, and its value would be silently truncated.

    Raises:
        TypeError: a 0-d tensor or array that does not hold an integer.
    """
    if isinstance(index, int | np.integer):
        return int(index)
    if isinstance(index, torch.Tensor | np.ndarray) and index.ndim == 0:
        if isinstance(index, torch.Tensor):
            integer = not (index.dtype.is_floating_point or index.dtype.is_complex)
            integer = integer and index.dtype != torch.bool
        else:
            integer = bool(np.issubdtype(index.dtype, np.integer))
        if not integer:
            raise TypeError(
                f"a 0-d index must hold an integer; received a {type(index).__name__} of "
                f"dtype {index.dtype} ({index!r}). Convert it, e.g. ds[int(i)]."
            )
        return int(index.item())
    return index


def check_batch_size(batch_size: Any) -> int:
    """A loader's ``batch_size``: an int >= 1.

    Raises:
        TypeError: not an int (a str, a float, a bool...).
        ValueError: an int below 1.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise TypeError(
            f"batch_size must be an int (samples per batch); received "
            f"{type(batch_size).__name__} {batch_size!r}. Pass e.g. ds.loader(64)."
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1 (samples per batch); received {batch_size}")
    return int(batch_size)


def check_prefetch_factor(kwargs: dict[str, Any]) -> int | None:
    """``prefetch_factor`` among a loader's settings: None (the default) or an int >= 1.

    Raises:
        ValueError: a value that is not an int >= 1 (0 would read nothing ahead).
    """
    if "prefetch_factor" not in kwargs:
        return None
    value = kwargs["prefetch_factor"]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(
            f"prefetch_factor must be an int >= 1 (batches read ahead per worker or thread) "
            f"or None for the default (2); received {value!r}"
        )
    return int(value)
