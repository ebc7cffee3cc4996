"""Explicit seeding. scramjet seeds nothing unless asked (``Trainer(seed=...)``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy and torch (CPU and every CUDA device).

    DataLoader workers are seeded from the loader's generator, which the Trainer derives
    from the same seed, so worker-side randomness is reproducible too.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int; received {type(seed).__name__} {seed!r}.")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def get_rng_states() -> dict[str, Any]:
    """Python, NumPy, torch CPU and CUDA generator states, checkpoint-friendly.

    Everything is a tensor or plain Python value so ``torch.load(weights_only=True)``
    can read it back.
    """
    np_state: Any = np.random.get_state()
    states: dict[str, Any] = {
        "python": _python_state_to_plain(random.getstate()),
        "numpy": {
            "kind": str(np_state[0]),
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
    }
    # torch.cuda.is_initialized is unannotated; it returns a bool.
    cuda_initialized = cast("Callable[[], bool]", torch.cuda.is_initialized)
    if torch.cuda.is_available() and cuda_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    """Restore generator states saved by :func:`get_rng_states`."""
    random.setstate(_python_state_from_plain(states["python"]))
    n = states["numpy"]
    np.random.set_state(
        (
            n["kind"],
            n["keys"].numpy().astype(np.uint32),
            n["pos"],
            n["has_gauss"],
            n["cached_gaussian"],
        )
    )
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _python_state_to_plain(state: tuple[Any, ...]) -> dict[str, Any]:
    version, internal, gauss = state
    return {
        "version": int(version),
        "internal": torch.tensor(internal, dtype=torch.int64),
        "gauss": gauss,
    }


def _python_state_from_plain(plain: dict[str, Any]) -> tuple[Any, ...]:
    internal = tuple(int(v) for v in plain["internal"].tolist())
    return (plain["version"], internal, plain["gauss"])
