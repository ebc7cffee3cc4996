"""Explicit seeding. scramjet seeds nothing unless asked (``Trainer(seed=...)``)."""

from __future__ import annotations

import numbers
import random
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy and torch (CPU and every CUDA device).

    DataLoader workers are seeded from the loader's generator, which the Trainer derives
    from the same seed, so worker-side randomness is reproducible too. ``seed`` may be any
    integer in torch's range, NumPy integers included (see :func:`check_seed`).
    """
    seed = check_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def check_seed(seed: Any) -> int:
    """``seed`` as a plain ``int``: any integer (``int``, NumPy integers such as the values
    of ``np.arange``) that torch accepts, from ``-2**63`` to ``2**64 - 1``.

    Raises:
        TypeError: ``seed`` is not an integer (a bool, a float, a string).
        ValueError: ``seed`` is out of torch's range.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"seed must be an integer; received {type(seed).__name__} {seed!r}. Pass a "
            f"whole number such as seed=0 (int(value) for a float or a string)."
        )
    value = int(seed)
    if not -(2**63) <= value < 2**64:
        raise ValueError(
            f"seed must be between -2**63 and 2**64 - 1 (torch's range); received {value}. "
            f"Pass a smaller number, e.g. seed % 2**32."
        )
    return value


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
