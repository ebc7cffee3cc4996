"""AIToolbox's dict helpers: joining per-batch metadata and flattening nested results."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

__all__ = [
    "combine_dict_elements",
    "combine_prediction_metadata_batches",
    "flatten_combine_dict",
    "flatten_dict",
]


def _join(key: str, parts: list[Any]) -> Any:
    if all(isinstance(p, list) for p in parts):
        return [item for part in parts for item in part]
    if all(isinstance(p, torch.Tensor) for p in parts):
        return torch.cat(parts)
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    kinds = sorted({type(p).__name__ for p in parts})
    raise TypeError(
        f"metadata {key!r} holds {kinds}; each batch's metadata values must all be lists, "
        f"torch tensors or numpy arrays so the batches can be joined."
    )


def combine_prediction_metadata_batches(
    metadata_list: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """Join per-batch metadata dicts key by key (lists extended, tensors/arrays concatenated).

    A key missing from some batches joins the batches that have it.

    Raises:
        TypeError: a value is not a list, tensor or array (or kinds are mixed for one key).
    """
    parts: dict[str, list[Any]] = {}
    for batch in metadata_list:
        for key, value in batch.items():
            parts.setdefault(key, []).append(value)
    return {key: _join(key, values) for key, values in parts.items()}


def flatten_dict(d: Mapping[str, Any], parent_key: str = "", sep: str = "_") -> dict[str, Any]:
    """Nested dicts become one level: ``{"a": {"b": 1}}`` → ``{"a_b": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{parent_key}{sep}{key}" if parent_key else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten_dict(value, name, sep))
        else:
            flat[name] = value
    return flat


def combine_dict_elements(list_of_dicts: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """``[{"a": 1}, {"a": 2, "b": 3}]`` → ``{"a": [1, 2], "b": [3]}``."""
    combined: dict[str, list[Any]] = {}
    for d in list_of_dicts:
        for key, value in d.items():
            combined.setdefault(key, []).append(value)
    return combined


def flatten_combine_dict(multi_level_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Values that are lists of dicts become one list per sub-key, named ``<key>_<sub-key>``."""
    flat: dict[str, Any] = {}
    for key, value in multi_level_dict.items():
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for sub_key, values in combine_dict_elements(value).items():
                flat[f"{key}_{sub_key}"] = values
        else:
            flat[key] = value
    return flat
