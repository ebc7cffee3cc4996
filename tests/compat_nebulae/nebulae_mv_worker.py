"""Functions run in each process of a Multiverse by the distributed tests."""

from __future__ import annotations

from typing import Any

import torch

from scramjet.runtime.distributed import gather_object


def reduce_universe(mv: Any) -> dict[str, Any]:
    """Reduce a rank-dependent tensor both ways; rank 0 returns what every rank saw."""
    mv.init()
    rank = mv.rank
    value = torch.tensor([float(rank + 1), 10.0 * (rank + 1)])
    seen = {
        "rank": rank,
        "sum": mv.reduce(value, aggregate=True).tolist(),
        "mean": mv.reduce(value, aggregate=False).tolist(),
    }
    every = gather_object(seen)
    return {
        "ranks": [s["rank"] for s in every],
        "sum": [s["sum"] for s in every],
        "mean": [s["mean"] for s in every],
    }
