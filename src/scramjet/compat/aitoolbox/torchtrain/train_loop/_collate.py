"""How a ``TrainLoop`` joins per-batch predictions, metadata and losses into its results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def _append(part: Any, collected: list[Any]) -> list[Any]:
    collected.append(part)
    return collected


def _concat(parts: list[Any]) -> Any:
    """Per-batch predictions joined: tensors concatenated, anything else flattened into a list."""
    if parts and all(isinstance(p, torch.Tensor) for p in parts):
        return torch.cat(
            [p.detach().cpu().reshape(-1, *p.shape[1:]) if p.dim() else p.reshape(1) for p in parts]
        )
    out: list[Any] = []
    for p in parts:
        out.extend(p.tolist() if hasattr(p, "tolist") else list(p))
    return out


def _loss_format(loss: Any, float_dict_format: bool) -> Any:
    """A stored loss (a float, or a dict of floats per loss) as AIToolbox returned it: 0-d
    float64 CPU tensors unless ``float_dict_format``."""
    if float_dict_format:
        return loss
    if isinstance(loss, Mapping):
        return {k: torch.tensor(v, dtype=torch.float64) for k, v in loss.items()}
    return torch.tensor(loss, dtype=torch.float64)


def _merge_meta(metas: list[Any]) -> dict[str, list[Any]] | None:
    """Per-batch metadata dicts joined key by key; None when no batch had metadata."""
    dicts = [m for m in metas if isinstance(m, Mapping)]
    if not dicts:
        return None
    merged: dict[str, list[Any]] = {}
    for m in dicts:
        for k, v in m.items():
            merged.setdefault(k, []).extend(v.tolist() if hasattr(v, "tolist") else list(v))
    return merged


def _rows(value: Any) -> Any:
    """A collated result as something :func:`gather_shards` takes (a tensor or a list)."""
    return value if isinstance(value, torch.Tensor | list | Mapping) else list(value)
