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


def backward_universe(mv: Any) -> dict[str, Any]:
    """``mv.reduce(loss).backward()`` on every rank, with the mean and with the sum."""
    mv.init()
    rank = mv.rank
    seen: dict[str, Any] = {"rank": rank}
    for name, aggregate in (("mean", False), ("sum", True)):
        w = torch.ones(2, requires_grad=True)
        loss = (w * (rank + 1)).sum()  # rank r: 2 (r + 1), gradient (r + 1) per element
        reduced = mv.reduce(loss, aggregate=aggregate)
        reduced.backward()
        seen[name] = {"value": reduced.item(), "grad": w.grad.tolist()}
    every = gather_object(seen)
    return {s["rank"]: {"mean": s["mean"], "sum": s["sum"]} for s in every}
